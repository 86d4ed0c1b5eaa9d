package dev.kpemu.machine;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

import dev.kpemu.natives.NativeLibraries;
import dev.kpemu.unicorn.Unicorn;

/**
 * Counts executed guest instructions exactly and stops the engine at an instruction deadline,
 * from inside a block hook written in C ({@code emulator/src/main/c/kpemu_clock.c}): Unicorn's
 * {@code count} costs 2.5-25x, a Java block upcall 6-20x, this 1.2-2x (see
 * shared/reference/unicorn-facts.md). A block is charged when it starts; a block cut short by
 * an exception is charged in full, which keeps runs deterministic.
 */
final class InstructionClock implements AutoCloseable {
    private static final long EXECUTED = 0, DEADLINE = 8, BLOCKS = 16, STOPPED = 24, ARM64 = 28, WATCH_IRQ = 32, WATCH_STOPS = 36;
    /** Feature bit of {@code kpemu_clock_features}: the interrupt-enable watch. */
    private static final int FEATURE_WATCH_IRQ = 1;
    private static final MemorySegment BLOCK_HOOK;
    private static final MethodHandle SIZE, FORGET;
    private static final int FEATURES;

    static {
        SymbolLookup lib = NativeLibraries.load(NativeLibraries.CLOCK);
        Linker linker = Linker.nativeLinker();
        BLOCK_HOOK = lib.find("kpemu_clock_block").orElseThrow();
        SIZE = linker.downcallHandle(lib.find("kpemu_clock_size").orElseThrow(), FunctionDescriptor.of(JAVA_LONG));
        FORGET = linker.downcallHandle(lib.find("kpemu_clock_forget").orElseThrow(), FunctionDescriptor.ofVoid(ADDRESS));
        // Libraries built before the watch existed have no kpemu_clock_features: no features.
        int f = 0;
        var sym = lib.find("kpemu_clock_features");
        if (sym.isPresent()) {
            try {
                f = (int) linker.downcallHandle(sym.get(), FunctionDescriptor.of(JAVA_INT)).invokeExact();
            } catch (Throwable t) {
                f = 0;
            }
        }
        FEATURES = f;
    }

    private final Arena arena = Arena.ofShared();
    private final MemorySegment state;
    private final Unicorn uc;
    private final Unicorn.Hook hook;

    InstructionClock(Unicorn uc, boolean arm64) {
        this.uc = uc;
        try {
            state = arena.allocate((long) SIZE.invokeExact(), 16);
        } catch (Throwable t) {
            throw new IllegalStateException("kpemu_clock_size: " + t, t);
        }
        state.fill((byte) 0);
        state.set(JAVA_INT, ARM64, arm64 ? 1 : 0);
        hook = uc.hookBlockNative(BLOCK_HOOK, state, 1, 0);
    }

    /** Instructions charged so far. */
    long executed() { return state.get(JAVA_LONG, EXECUTED); }

    /** Arms a slice: stop before a block that would pass {@code executed() + n}. */
    void arm(long n) {
        state.set(JAVA_LONG, DEADLINE, executed() + n);
        state.set(JAVA_LONG, BLOCKS, 0);
        state.set(JAVA_INT, STOPPED, 0);
    }

    /** Moves the running slice's deadline earlier (never later); the block hook stops there. */
    void lowerDeadline(long executedDeadline) {
        if (executedDeadline < state.get(JAVA_LONG, DEADLINE)) state.set(JAVA_LONG, DEADLINE, executedDeadline);
    }

    /** True when the last slice ended because the deadline came. */
    boolean reachedDeadline() { return state.get(JAVA_INT, STOPPED) != 0; }

    /** Drops cached block sizes (after guest text changed under the host). */
    void forgetBlocks() {
        try {
            FORGET.invokeExact(state);
        } catch (Throwable t) {
            throw new IllegalStateException("kpemu_clock_forget: " + t, t);
        }
    }

    /** True when the native hook can watch for the guest enabling interrupts (see kpemu_clock.c). */
    static boolean canWatchInterrupts() { return (FEATURES & FEATURE_WATCH_IRQ) != 0; }

    /**
     * Turns the interrupt-enable watch on or off: while on, the slice ends before the first
     * block that starts with interrupts enabled (arm64 PSTATE.I clear, x86 EFLAGS.IF set).
     * Ignored when the library lacks the feature.
     */
    void watchInterrupts(boolean on) {
        if (canWatchInterrupts()) state.set(JAVA_INT, WATCH_IRQ, on ? 1 : 0);
    }

    /** Slices the watch ended. */
    long watchStops() { return canWatchInterrupts() ? Integer.toUnsignedLong(state.get(JAVA_INT, WATCH_STOPS)) : 0; }

    @Override public void close() {
        arena.close();
    }

    Unicorn.Hook hook() { return hook; }
}
