package dev.kpemu.machine;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
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
    private static final long EXECUTED = 0, DEADLINE = 8, BLOCKS = 16, STOPPED = 24, ARM64 = 28, WATCH_IRQ = 32, WATCH_STOPS = 36,
            NBREAKS = 40, BREAK_HIT = 44, SKIP_ONCE = 48, TSC_OFFSET = 56, GUARD = 64, BREAKS = 72;
    /** Capacity of the native break list (KPEMU_BREAKS in kpemu_clock.c). */
    static final int MAX_BREAKS = 64;
    /** Feature bit of {@code kpemu_clock_features}: the native break list. */
    private static final int FEATURE_BREAKS = 4;
    /** Feature bit of {@code kpemu_clock_features}: the interrupt-enable watch. */
    private static final int FEATURE_WATCH_IRQ = 1;
    /** Feature bit of {@code kpemu_clock_features}: the virtual time stamp counter. */
    private static final int FEATURE_TSC = 8;
    /** Feature bit of {@code kpemu_clock_features}: the text guard. */
    private static final int FEATURE_GUARD = 16;
    /** Feature bit of {@code kpemu_clock_features}: the text guard's granule bitmap. */
    private static final int FEATURE_GUARD_BITS = 32;
    /** Feature bit of {@code kpemu_clock_features}: the break filter. */
    private static final int FEATURE_BREAK_FILTER = 64;
    /**
     * Feature bit of {@code kpemu_clock_features}: on arm64 the block hook finds break addresses
     * through the granule bitmap (the host marks each one's granule), not the break filter.
     */
    private static final int FEATURE_ARM64_BREAKS_IN_BITMAP = 128;
    /** Feature bit of {@code kpemu_clock_features}: the granule bitmap is followed by a page summary. */
    private static final int FEATURE_PAGE_SUMMARY = 256;
    /** Feature bit of {@code kpemu_clock_features}: the x86 block cache refreshed on translation. */
    private static final int FEATURE_BLOCK_GENERATED = 512;
    /** Feature bit of {@code kpemu_clock_features}: the live guest time and the filter's counter. */
    private static final int FEATURE_LIVE_TIME = 1024;
    private static final MemorySegment BLOCK_HOOK, GENERATED_HOOK, RDTSC_HOOK, RDTSCP_HOOK;
    private static final MethodHandle SIZE, FORGET;
    private static final int FEATURES;
    /** Offset of {@code guard_bits} in {@code struct kpemu_clock}, or -1 (a library without the bitmap). */
    private static final long GUARD_BITS;
    /** Offset of {@code break_filter} in {@code struct kpemu_clock}, or -1 (a library without it). */
    private static final long BREAK_FILTER;
    /** Offset of {@code instr_offset} (then {@code idle_nanos}, {@code nanos_per_instr}), or -1. */
    private static final long LIVE_TIME;

    static {
        SymbolLookup lib = NativeLibraries.load(NativeLibraries.CLOCK);
        Linker linker = Linker.nativeLinker();
        BLOCK_HOOK = lib.find("kpemu_clock_block").orElseThrow();
        GENERATED_HOOK = lib.find("kpemu_clock_tb_generated").orElse(MemorySegment.NULL);
        RDTSC_HOOK = lib.find("kpemu_rdtsc").orElse(MemorySegment.NULL);
        RDTSCP_HOOK = lib.find("kpemu_rdtscp").orElse(MemorySegment.NULL);
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
        long bitsAt = -1;
        if ((f & FEATURE_GUARD_BITS) != 0) {
            try {
                bitsAt = (long) linker.downcallHandle(lib.find("kpemu_clock_guard_bits_offset").orElseThrow(), FunctionDescriptor.of(JAVA_LONG)).invokeExact();
                int bits = (int) linker.downcallHandle(lib.find("kpemu_guard_bitmap_bits").orElseThrow(), FunctionDescriptor.of(JAVA_INT)).invokeExact();
                int shift = (int) linker.downcallHandle(lib.find("kpemu_guard_granule_shift").orElseThrow(), FunctionDescriptor.of(JAVA_INT)).invokeExact();
                int pages = (f & FEATURE_PAGE_SUMMARY) == 0 ? -1
                        : (int) linker.downcallHandle(lib.find("kpemu_guard_page_bits").orElseThrow(), FunctionDescriptor.of(JAVA_INT)).invokeExact();
                if (pages != GranuleBitmap.PAGE_BITS) {
                    throw new IllegalStateException("libkpemu_clock.so has no page summary of GranuleBitmap's size (" + pages
                            + " bits); rebuild it with scripts/fetch-natives.sh");
                }
                if (bits != GranuleBitmap.BITS || shift != GranuleBitmap.GRANULE_SHIFT) {
                    throw new IllegalStateException("libkpemu_clock.so's guard bitmap (" + bits + " bits, granule 2^" + shift
                            + ") is not GranuleBitmap's; rebuild it with scripts/fetch-natives.sh");
                }
            } catch (RuntimeException e) {
                throw e;
            } catch (Throwable t) {
                throw new IllegalStateException("kpemu_clock_guard_bits_offset: " + t, t);
            }
        }
        GUARD_BITS = bitsAt;
        long filterAt = -1;
        if ((f & FEATURE_BREAK_FILTER) != 0) {
            try {
                filterAt = (long) linker.downcallHandle(lib.find("kpemu_clock_break_filter_offset").orElseThrow(), FunctionDescriptor.of(JAVA_LONG)).invokeExact();
            } catch (Throwable t) {
                throw new IllegalStateException("kpemu_clock_break_filter_offset: " + t, t);
            }
        }
        BREAK_FILTER = filterAt;
        long liveAt = -1;
        if ((f & FEATURE_LIVE_TIME) != 0) {
            try {
                liveAt = (long) linker.downcallHandle(lib.find("kpemu_clock_live_time_offset").orElseThrow(), FunctionDescriptor.of(JAVA_LONG)).invokeExact();
            } catch (Throwable t) {
                throw new IllegalStateException("kpemu_clock_live_time_offset: " + t, t);
            }
        }
        LIVE_TIME = liveAt;
    }


    /** Rewrites {@code break_filter} from the break list: bit (address >> 4) mod 64 of each break address. */
    private void updateBreakFilter() {
        if (BREAK_FILTER < 0) return;
        long filter = 0;
        int n = state.get(JAVA_INT, NBREAKS);
        for (int i = 0; i < n; i++) filter |= 1L << ((state.get(JAVA_LONG, BREAKS + 8L * i) >>> 4) & 63);
        state.set(JAVA_LONG, BREAK_FILTER, filter);
    }

    private final Arena arena = Arena.ofShared();
    private final MemorySegment state;
    private final Unicorn uc;
    private final Unicorn.Hook hook;
    private final Unicorn.Hook generatedHook;   // x86 only
    private final boolean arm64;
    /** Created at the first mark: until then the hook has no bitmap to test (a boot with no probe and no break). */
    private GranuleBitmap granules;

    InstructionClock(Unicorn uc, boolean arm64) {
        this.uc = uc;
        this.arm64 = arm64;
        try {
            state = arena.allocate((long) SIZE.invokeExact(), 16);
        } catch (Throwable t) {
            throw new IllegalStateException("kpemu_clock_size: " + t, t);
        }
        state.fill((byte) 0);
        state.set(JAVA_INT, ARM64, arm64 ? 1 : 0);
        hook = uc.hookBlockNative(BLOCK_HOOK, state, 1, 0);
        // x86 block counts are cached by address and size; a re-translated block (the guest
        // rewrote its text) must replace its entry before it runs (kpemu_clock_tb_generated).
        if (!arm64) {
            if ((FEATURES & FEATURE_BLOCK_GENERATED) == 0 || GENERATED_HOOK.equals(MemorySegment.NULL)) {
                throw new IllegalStateException("libkpemu_clock.so predates the refreshed x86 block cache; rebuild it with scripts/fetch-natives.sh");
            }
            generatedHook = uc.hookBlockGeneratedNative(GENERATED_HOOK, state);
        } else {
            generatedHook = null;
        }
    }

    /** Instructions charged so far. */
    long executed() { return state.get(JAVA_LONG, EXECUTED); }

    static boolean supportsBreaks() { return (FEATURES & FEATURE_BREAKS) != 0; }

    /** Adds a stop address (a block start): the engine stops before the block there runs. */
    void addBreak(long address) {
        if (!supportsBreaks()) {
            throw new IllegalStateException("libkpemu_clock.so predates native breakpoints; rebuild it with scripts/fetch-natives.sh");
        }
        int n = state.get(JAVA_INT, NBREAKS);
        for (int i = 0; i < n; i++) if (state.get(JAVA_LONG, BREAKS + 8L * i) == address) return;
        if (n == MAX_BREAKS) throw new IllegalStateException("more than " + MAX_BREAKS + " host breakpoints");
        state.set(JAVA_LONG, BREAKS + 8L * n, address);
        state.set(JAVA_INT, NBREAKS, n + 1);
        updateBreakFilter();
        if (breaksInBitmap()) granules().mark(address, 4, 1);
    }

    /** arm64: break addresses are marked in the granule bitmap, the hook's one test per block. */
    private boolean breaksInBitmap() {
        if (!arm64) return false;
        if ((FEATURES & FEATURE_ARM64_BREAKS_IN_BITMAP) == 0) {
            throw new IllegalStateException("libkpemu_clock.so predates arm64 breaks in the granule bitmap; rebuild it with scripts/fetch-natives.sh");
        }
        return true;
    }

    /**
     * The granule bitmap the block hook tests once per block (created, and given to the hook, on
     * first use): {@link TextGuard}'s ranges and, on arm64, the break addresses.
     */
    GranuleBitmap granules() {
        if (granules == null) {
            if (GUARD_BITS < 0) {
                throw new IllegalStateException("libkpemu_clock.so predates the text guard's bitmap; rebuild it with scripts/fetch-natives.sh");
            }
            granules = new GranuleBitmap();
            state.set(java.lang.foreign.ValueLayout.ADDRESS, GUARD_BITS, granules.nativeBits());
        }
        return granules;
    }

    void removeBreak(long address) {
        int n = state.get(JAVA_INT, NBREAKS);
        for (int i = 0; i < n; i++) {
            if (state.get(JAVA_LONG, BREAKS + 8L * i) != address) continue;
            state.set(JAVA_LONG, BREAKS + 8L * i, state.get(JAVA_LONG, BREAKS + 8L * (n - 1)));
            state.set(JAVA_INT, NBREAKS, n - 1);
            updateBreakFilter();
            if (breaksInBitmap()) granules().mark(address, 4, -1);
            return;
        }
    }

    /** The break address that stopped the last slice, or -1 (and clears it). */
    long takeBreakHit() {
        int hit = state.get(JAVA_INT, BREAK_HIT);
        if (hit == 0) return -1;
        state.set(JAVA_INT, BREAK_HIT, 0);
        return state.get(JAVA_LONG, BREAKS + 8L * (hit - 1));
    }

    /** The next time the block at {@code address} starts, do not stop there. */
    void skipBreakOnce(long address) { state.set(JAVA_LONG, SKIP_ONCE, address); }

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

    /**
     * Answers the guest's x86 {@code rdtsc}/{@code rdtscp} from this clock (native instruction
     * hooks, Unicorn 2.1.4+): the TSC is the value last given to {@link #setTimeStampCounter}
     * plus the instructions charged since.
     */
    void hookTimeStampCounter() {
        if ((FEATURES & FEATURE_TSC) == 0 || RDTSC_HOOK.equals(MemorySegment.NULL)) {
            throw new IllegalStateException("libkpemu_clock.so predates the virtual TSC; rebuild it with scripts/fetch-natives.sh");
        }
        uc.hookInsnNative(Unicorn.X86_INS_RDTSC, RDTSC_HOOK, state, this);
        uc.hookInsnNative(Unicorn.X86_INS_RDTSCP, RDTSCP_HOOK, state, this);
    }

    /**
     * From now on the block hook checks {@code guardState} (a {@link TextGuard}'s native table),
     * looking up a block's page only when the {@link #granules} bitmap has a bit set for one of its granules.
     */
    void attachGuard(MemorySegment guardState) {
        if ((FEATURES & FEATURE_GUARD) == 0) {
            throw new IllegalStateException("libkpemu_clock.so predates the text guard; rebuild it with scripts/fetch-natives.sh");
        }
        granules();
        state.set(java.lang.foreign.ValueLayout.ADDRESS, GUARD, guardState);
    }

    /**
     * The guest time now is {@code chargedInstructions} (the virtual clock's, without the slice
     * about to run) and {@code idleNanos}: native readers (the arm64 system counter) compute
     * {@link VirtualClock#liveNanos()} from it and the instructions the slice has executed.
     */
    void setLiveTime(long chargedInstructions, long idleNanos) {
        if (LIVE_TIME < 0) return;
        state.set(JAVA_LONG, LIVE_TIME, chargedInstructions - executed());
        state.set(JAVA_LONG, LIVE_TIME + 8, idleNanos);
    }

    /** The clock's native state when the library computes the live guest time, else null. */
    MemorySegment liveTimeState(double nanosPerInstruction) {
        if (LIVE_TIME < 0) return null;
        state.set(JAVA_DOUBLE, LIVE_TIME + 16, nanosPerInstruction);
        return state;
    }

    /** The guest TSC is {@code tsc} now, and advances with every charged instruction. */
    void setTimeStampCounter(long tsc) { state.set(JAVA_LONG, TSC_OFFSET, tsc - executed()); }

    /** The guest TSC now (what {@code rdtsc} would read between blocks). */
    long timeStampCounter() { return executed() + state.get(JAVA_LONG, TSC_OFFSET); }

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
        closeGranules();
    }

    /** Frees the granule bitmap (once the engine, whose hook reads it, is closed). */
    void closeGranules() {
        if (granules != null) granules.close();
        granules = null;
    }

    Unicorn.Hook hook() { return hook; }
}
