package dev.kpemu.unicorn;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.kpemu.natives.NativeLibraries;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Keeps every engine's translation buffer within a direct call of libunicorn's helpers and of
 * kpemu's block hook ({@code kpemu_code_placement.c} says why: translated code calls them once a block or
 * more, and a call through memory made the same run up to 40 % slower). Address space for
 * {@link #CHUNKS} buffers is reserved once, when the first engine opens, in the free ranges within
 * a direct call of libunicorn's code; each engine's buffer is mapped into one of those ranges (the
 * hook reached through a jump placed there) and the range is reserved again when the engine
 * closes, or when its opening failed. The kernel hands out the highest free range that fits first: a
 * free range above the reserved ones (memory unmapped since they were reserved, such as a closed
 * machine's RAM), or another thread's mapping taking the freed range first, puts the buffer
 * elsewhere; the range is then reserved again and {@link Unicorn#open} opens the engine again while
 * the misplaced buffer holds that place ({@code Unicorn.PLACEMENT_ATTEMPTS} at most). Placement changes only the host's speed, never what the guest
 * runs. Without the native functions (an older {@code libkpemu_clock.so}) engines map their
 * buffers where the kernel puts them.
 */
final class CodePlacement {
    /** The translation buffer of each engine (Unicorn's default is 1 GiB; a boot with a workload fills some 40 MiB). */
    static final long BUFFER_BYTES = Long.getLong("kpemu.codeBufferMiB", 128) << 20;
    /**
     * Each reserved range: the buffer, room for the kernel's 2 MiB alignment of it, and for what the
     * engine's initialization maps before its buffer (malloc's large blocks, e.g. the translated
     * blocks' hash table, go to the highest free range too).
     */
    private static final long CHUNK_BYTES = BUFFER_BYTES + (16L << 20);
    /** Reserved ranges: one per vCPU of an 8-CPU machine, and as many again for engines of machines not yet closed. */
    static final int CHUNKS = 16;

    private static final MethodHandle RESERVE, RELEASE, SETTLE, RETURN, ENTRY;
    private static final AtomicLong PLACED = new AtomicLong(), ELSEWHERE = new AtomicLong();
    private static volatile int reserved = -1;

    static {
        MethodHandle reserve = null, release = null, settle = null, ret = null, entry = null;
        try {
            SymbolLookup lib = NativeLibraries.load(NativeLibraries.CLOCK);
            Linker linker = Linker.nativeLinker();
            Optional<MemorySegment> r = lib.find("kpemu_code_reserve");
            if (r.isPresent()) {
                reserve = linker.downcallHandle(r.get(), FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT));
                release = linker.downcallHandle(lib.find("kpemu_code_release").orElseThrow(), FunctionDescriptor.of(JAVA_INT));
                settle = linker.downcallHandle(lib.find("kpemu_code_settle").orElseThrow(), FunctionDescriptor.of(JAVA_INT, JAVA_INT));
                ret = linker.downcallHandle(lib.find("kpemu_code_return").orElseThrow(), FunctionDescriptor.ofVoid(JAVA_INT));
                entry = linker.downcallHandle(lib.find("kpemu_code_entry").orElseThrow(), FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG));
            }
        } catch (RuntimeException e) {
            reserve = null;   // no clock library: engines place their buffers as Unicorn does
        }
        RESERVE = reserve;
        RELEASE = release;
        SETTLE = settle;
        RETURN = ret;
        ENTRY = entry;
    }

    private CodePlacement() {}

    private static synchronized void reserveOnce() {
        if (reserved >= 0 || RESERVE == null) return;
        try {
            reserved = (int) RESERVE.invokeExact(CHUNK_BYTES, CHUNKS);
        } catch (Throwable t) {
            reserved = 0;
        }
    }

    /** Frees a reserved range for the engine about to map its buffer: its index, or -1 (none left, or no native support). */
    static int release() {
        reserveOnce();
        if (RELEASE == null || reserved <= 0) return -1;
        try {
            return (int) RELEASE.invokeExact();
        } catch (Throwable t) {
            return -1;
        }
    }

    /** After the engine mapped its buffer: whether it landed in range {@code index} (else the range is reserved again). */
    static boolean settle(int index) {
        boolean placed = false;
        if (index >= 0 && SETTLE != null) {
            try {
                placed = (int) SETTLE.invokeExact(index) == 1;
            } catch (Throwable t) {
                placed = false;
            }
        }
        (placed ? PLACED : ELSEWHERE).incrementAndGet();
        return placed;
    }

    /** After the engine holding range {@code index} closed, or failed to open after {@link #release}. */
    static void giveBack(int index) {
        if (index < 0 || RETURN == null) return;
        try {
            RETURN.invokeExact(index);
        } catch (Throwable t) {
            // the range stays unreserved: a later engine maps its buffer where the kernel puts it
        }
    }

    /**
     * An address the translated code in range {@code index} can call directly that runs native
     * {@code target} (a jump placed below the buffer; kpemu's library may lie far from it), or
     * {@code target} itself.
     */
    static MemorySegment entry(int index, MemorySegment target) {
        if (index < 0 || ENTRY == null) return target;
        try {
            long e = (long) ENTRY.invokeExact(index, target.address());
            return e == target.address() ? target : MemorySegment.ofAddress(e);
        } catch (Throwable t) {
            return target;
        }
    }

    /** Ranges reserved when the first engine opened (0 without native support). */
    static int reservedRanges() {
        reserveOnce();
        return Math.max(reserved, 0);
    }

    /** Engines whose buffer landed in a reserved range, and engines whose buffer the kernel put elsewhere. */
    static long placed() { return PLACED.get(); }
    static long elsewhere() { return ELSEWHERE.get(); }
}
