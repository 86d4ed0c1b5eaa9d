package dev.kpemu.machine;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;

import dev.kpemu.natives.NativeLibraries;

/**
 * kpemu's own native hooks in {@link NativeLibraries#CLOCK}: each is a function {@code NAME} taking
 * a state struct, with a function {@code NAME_size} that returns the struct's size as the C
 * compiler laid it out, checked here against the size the Java side writes.
 */
public final class NativeHookFunctions {
    private NativeHookFunctions() {}

    /**
     * The hook function {@code name}, or null when the library was built before it existed (the
     * caller then keeps its Java path). A size that differs from {@code structSize} is an error:
     * the library and the Java side disagree on the struct.
     */
    public static MemorySegment find(String name, long structSize) {
        SymbolLookup lib = NativeLibraries.load(NativeLibraries.CLOCK);
        MemorySegment hook = lib.find(name).orElse(null);
        if (hook == null) return null;
        long size;
        try {
            size = (long) Linker.nativeLinker().downcallHandle(lib.find(name + "_size").orElseThrow(),
                    FunctionDescriptor.of(JAVA_LONG)).invokeExact();
        } catch (Throwable t) {
            throw new IllegalStateException(name + "_size: " + t, t);
        }
        if (size != structSize) throw new IllegalStateException(NativeLibraries.CLOCK + "'s struct " + name + " is " + size + " bytes, not " + structSize);
        return hook;
    }

    /**
     * Writes where {@code memory}'s RAM lies in host memory into a hook's table of RAM regions (a
     * u32 count at {@code countOffset}; at {@code tableOffset}, {@code max} entries of guest-physical
     * base and end and the host address, 24 bytes each), which the hook's page walks read in place.
     * Returns the region count written, so a caller can skip the next call while it is unchanged.
     */
    public static int writeRamRegions(MemorySegment state, long countOffset, long tableOffset, int max, GuestMemory memory) {
        int n = memory.ramRegionCount();
        int used = Math.min(n, max);
        for (int i = 0; i < used; i++) {
            MemorySegment host = memory.ramHost(i);
            long e = tableOffset + 24L * i;
            state.set(JAVA_LONG, e, memory.ramBase(i));
            state.set(JAVA_LONG, e + 8, memory.ramBase(i) + host.byteSize());
            state.set(ADDRESS, e + 16, host);
        }
        state.set(JAVA_INT, countOffset, used);
        return n;
    }
}
