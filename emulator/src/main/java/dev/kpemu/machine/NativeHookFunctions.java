package dev.kpemu.machine;

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
}
