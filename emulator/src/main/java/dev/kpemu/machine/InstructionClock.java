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
    /** Capacity of the native break list (KPEMU_BREAKS in kpemu_clock.c: 64 in libraries without the filter). */
    static final int MAX_BREAKS;
    /** Feature bit of {@code kpemu_clock_features}: the break filter and a break list of kpemu_clock_break_capacity(). */
    private static final int FEATURE_BREAK_FILTER = 4096;
    /** Offsets of {@code break_filter} and {@code break_bits}, and log2 of the filter's bits; -1 without the filter. */
    private static final long BREAK_FILTER, BREAK_BITS;
    private static final int BREAK_BITS_LOG2;
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
    /** Feature bit of {@code kpemu_clock_features}: the live guest time and the filter's counter. */
    private static final int FEATURE_LIVE_TIME = 1024;
    /**
     * Feature bit of {@code kpemu_clock_features}: breaks and the text guard checked when a block is
     * translated (kpemu_clock_tb_generated, on both arches, which also refreshes the x86 block
     * cache), with {@code resumed_break}.
     */
    private static final int FEATURE_CHECKS_AT_TRANSLATION = 2048;
    private static final MemorySegment BLOCK_HOOK, GENERATED_HOOK, RDTSC_HOOK, RDTSCP_HOOK;
    private static final MethodHandle SIZE, FORGET;
    private static final int FEATURES;
    /** Offset of {@code guard_bits} in {@code struct kpemu_clock}, or -1 (a library without the bitmap). */
    private static final long GUARD_BITS;
    /** Offset of {@code resumed_break} in {@code struct kpemu_clock}. */
    private static final long RESUMED_BREAK;
    /** Offset of {@code instr_offset} (then {@code idle_nanos}, {@code nanos_per_instr}), or -1. */
    private static final long LIVE_TIME;
    /** Feature bit of {@code kpemu_clock_features}: instruction stops (mids). */
    private static final int FEATURE_MIDS = 8192;
    /** Offsets of {@code mid_bits}, {@code nmids}, {@code mid_hit}, {@code mids}; -1 without mids. */
    private static final long MID_BITS, NMIDS, MID_HIT, MIDS, HIT_PREV;
    /** Capacity of the native mid list (KPEMU_MIDS), 0 without mids; bits of its granule bitmap. */
    static final int MAX_MIDS, MID_BITMAP_BITS;
    /** Feature bit of {@code kpemu_clock_features}: the x86 kernel stack page kept out of Unicorn's store slow path. */
    private static final int FEATURE_STACK_DIRTY = 16384;
    /** Offset of {@code set_dirty} (then {@code engine_cpu}, {@code dirty_lo}, {@code dirty_hi}, {@code dirty_marks}), or -1. */
    private static final long STACK_DIRTY;
    /** Feature bit of {@code kpemu_clock_features}: x86 string stores into a code-free range kept out of that slow path. */
    private static final int FEATURE_STRING_DIRTY = 32768;
    /** Offset of {@code string_lo} (then {@code string_hi}, {@code string_marks}), or -1. */
    private static final long STRING_DIRTY;

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
        if ((f & FEATURE_CHECKS_AT_TRANSLATION) == 0 || GENERATED_HOOK.equals(MemorySegment.NULL)) {
            throw new IllegalStateException("libkpemu_clock.so predates breaks checked at translation; rebuild it with scripts/fetch-natives.sh");
        }
        RESUMED_BREAK = offset(lib, linker, "kpemu_clock_resumed_break_offset");
        LIVE_TIME = (f & FEATURE_LIVE_TIME) != 0 ? offset(lib, linker, "kpemu_clock_live_time_offset") : -1;
        long filterAt = -1, bitsOff = -1;
        int capacity = 64, log2 = -1;
        if ((f & FEATURE_BREAK_FILTER) != 0) {
            try {
                filterAt = (long) linker.downcallHandle(lib.find("kpemu_clock_break_filter_offset").orElseThrow(), FunctionDescriptor.of(JAVA_LONG)).invokeExact();
                bitsOff = (long) linker.downcallHandle(lib.find("kpemu_clock_break_bits_offset").orElseThrow(), FunctionDescriptor.of(JAVA_LONG)).invokeExact();
                capacity = (int) linker.downcallHandle(lib.find("kpemu_clock_break_capacity").orElseThrow(), FunctionDescriptor.of(JAVA_INT)).invokeExact();
                log2 = (int) linker.downcallHandle(lib.find("kpemu_clock_break_bits_log2").orElseThrow(), FunctionDescriptor.of(JAVA_INT)).invokeExact();
            } catch (Throwable t) {
                throw new IllegalStateException("kpemu_clock_break_filter_offset: " + t, t);
            }
        }
        BREAK_FILTER = filterAt;
        BREAK_BITS = bitsOff;
        BREAK_BITS_LOG2 = log2;
        MAX_BREAKS = capacity;
        long midBits = -1, nmids = -1, midHit = -1, mids = -1, hitPrev = -1;
        int midCapacity = 0, midBitmapBits = 0;
        if ((f & FEATURE_MIDS) != 0) {
            try {
                midBits = (long) linker.downcallHandle(lib.find("kpemu_clock_mid_bits_offset").orElseThrow(), FunctionDescriptor.of(JAVA_LONG)).invokeExact();
                nmids = (long) linker.downcallHandle(lib.find("kpemu_clock_nmids_offset").orElseThrow(), FunctionDescriptor.of(JAVA_LONG)).invokeExact();
                midHit = (long) linker.downcallHandle(lib.find("kpemu_clock_mid_hit_offset").orElseThrow(), FunctionDescriptor.of(JAVA_LONG)).invokeExact();
                mids = (long) linker.downcallHandle(lib.find("kpemu_clock_mids_offset").orElseThrow(), FunctionDescriptor.of(JAVA_LONG)).invokeExact();
                midCapacity = (int) linker.downcallHandle(lib.find("kpemu_clock_mid_capacity").orElseThrow(), FunctionDescriptor.of(JAVA_INT)).invokeExact();
                hitPrev = (long) linker.downcallHandle(lib.find("kpemu_clock_hit_prev_offset").orElseThrow(), FunctionDescriptor.of(JAVA_LONG)).invokeExact();
                midBitmapBits = (int) linker.downcallHandle(lib.find("kpemu_clock_mid_bitmap_bits").orElseThrow(), FunctionDescriptor.of(JAVA_INT)).invokeExact();
            } catch (Throwable t) {
                throw new IllegalStateException("kpemu_clock_mid_bits_offset: " + t, t);
            }
        }
        MID_BITS = midBits;
        NMIDS = nmids;
        MID_HIT = midHit;
        MIDS = mids;
        HIT_PREV = hitPrev;
        MAX_MIDS = midCapacity;
        MID_BITMAP_BITS = midBitmapBits;
        STACK_DIRTY = (f & FEATURE_STACK_DIRTY) != 0 ? offset(lib, linker, "kpemu_clock_stack_dirty_offset") : -1;
        STRING_DIRTY = STACK_DIRTY >= 0 && (f & FEATURE_STRING_DIRTY) != 0 ? offset(lib, linker, "kpemu_clock_string_dirty_offset") : -1;
    }

    /** The value of the clock library's {@code size_t name(void)} (a field's offset). */
    private static long offset(SymbolLookup lib, Linker linker, String name) {
        try {
            return (long) linker.downcallHandle(lib.find(name).orElseThrow(), FunctionDescriptor.of(JAVA_LONG)).invokeExact();
        } catch (Throwable t) {
            throw new IllegalStateException(name + ": " + t, t);
        }
    }

    /** The filter's bit for a break address (kpemu_clock.c's break_may_be: a multiplicative hash). */
    private static long breakBit(long address) { return (address * 0x9E3779B97F4A7C15L) >>> (64 - BREAK_BITS_LOG2); }

    /** False only when no break can be at {@code address} (its filter bit is clear). */
    private boolean breakMayBe(long address) {
        if (BREAK_BITS < 0) return true;
        long bit = breakBit(address);
        return ((state.get(JAVA_LONG, BREAK_BITS + 8 * (bit >>> 6)) >>> (bit & 63)) & 1) != 0;
    }

    private void setBreakBit(long address) {
        if (BREAK_BITS < 0) return;
        long bit = breakBit(address), at = BREAK_BITS + 8 * (bit >>> 6);
        state.set(JAVA_LONG, at, state.get(JAVA_LONG, at) | (1L << (bit & 63)));
    }

    /** The filter made again from the list (after a removal: another break may share a bit). */
    private void rebuildBreakBits() {
        if (BREAK_BITS < 0) return;
        state.asSlice(BREAK_BITS, (1L << BREAK_BITS_LOG2) / 8).fill((byte) 0);
        int n = state.get(JAVA_INT, NBREAKS);
        for (int i = 0; i < n; i++) setBreakBit(state.get(JAVA_LONG, BREAKS + 8L * i));
    }


    private final Arena arena = Arena.ofShared();
    private final MemorySegment state;
    private final Unicorn uc;
    private final Unicorn.Hook hook;
    private final Unicorn.Hook generatedHook;
    /** Created with the text guard: until then translation has no bitmap to test. */
    private GranuleBitmap granules;

    InstructionClock(Unicorn uc, boolean arm64) {
        this.uc = uc;
        try {
            state = arena.allocate((long) SIZE.invokeExact(), 16);
        } catch (Throwable t) {
            throw new IllegalStateException("kpemu_clock_size: " + t, t);
        }
        state.fill((byte) 0);
        state.set(JAVA_INT, ARM64, arm64 ? 1 : 0);
        if (BREAK_FILTER >= 0) state.set(JAVA_INT, BREAK_FILTER, 1);
        hook = uc.hookBlockNative(BLOCK_HOOK, state, 1, 0);
        // Breaks and guarded text are checked when a block is translated; x86 block counts are
        // cached by address and size, and a re-translated block (the guest rewrote its text) must
        // replace its entry before it runs.
        generatedHook = uc.hookBlockGeneratedNative(GENERATED_HOOK, state);
    }

    /**
     * x86: at the first block of every slice whose stack pointer lies in [{@code low}, {@code high})
     * (guest-virtual; a range that holds no code, e.g. the kernel's .data with init_task's stack),
     * marks the stack page's TLB entries dirty with Unicorn's own {@code tlb_set_dirty}, so that
     * stores to it leave Unicorn's store slow path even while the page is also mapped executable
     * (kpemu_clock.c, "The kernel stack page out of Unicorn's store slow path"). False, and
     * nothing done, on arm64 or when the clock library or libunicorn lacks what it needs.
     */
    boolean keepStackPageWritable(long low, long high) {
        if (!setDirtyCall() || Long.compareUnsigned(low, high) >= 0) return false;
        state.set(JAVA_LONG, STACK_DIRTY + 16, low);
        state.set(JAVA_LONG, STACK_DIRTY + 24, high);
        return true;
    }

    /**
     * x86: a rep string instruction that stores into [{@code low}, {@code high}) (guest-virtual, a
     * range that holds no code, e.g. the kernel's .bss and .brk, which clear_bss zeroes) has the
     * page it stores to marked dirty as {@link #keepStackPageWritable} does, after a few of its
     * iterations, until there have been as many marks as the range has pages (kpemu_clock.c,
     * "String stores into a code-free range"). False, and nothing done, on arm64 or when the clock
     * library or libunicorn lacks what it needs.
     */
    boolean keepStringStoresWritable(long low, long high) {
        if (STRING_DIRTY < 0 || !setDirtyCall() || high == 0 || Long.compareUnsigned(low, high) >= 0) return false;
        state.set(JAVA_LONG, STRING_DIRTY, low);
        state.set(JAVA_LONG, STRING_DIRTY + 8, high);
        forgetBlocks();   // entries cached before carry no flag
        return true;
    }

    /** Unicorn's tlb_set_dirty and the engine's CPU offset in the state; false when unavailable. */
    private boolean setDirtyCall() {
        var call = Unicorn.tlbSetDirtyX86();
        if (STACK_DIRTY < 0 || state.get(JAVA_INT, ARM64) != 0 || call.isEmpty()) return false;
        state.set(JAVA_LONG, STACK_DIRTY + 8, call.get().engineCpuOffset());
        state.set(ADDRESS, STACK_DIRTY, call.get().function());
        return true;
    }

    /** Stack pages {@link #keepStackPageWritable} has marked so far. */
    long stackPagesMarked() { return STACK_DIRTY < 0 ? 0 : state.get(JAVA_LONG, STACK_DIRTY + 32); }

    /** Pages {@link #keepStringStoresWritable} has marked so far. */
    long stringStorePagesMarked() { return STRING_DIRTY < 0 ? 0 : state.get(JAVA_LONG, STRING_DIRTY + 16); }

    /** Instructions charged so far. */
    long executed() { return state.get(JAVA_LONG, EXECUTED); }

    /** Where {@link #executed()} lives (native code that stamps a record reads it there). */
    java.lang.foreign.MemorySegment executedCounter() { return state.asSlice(EXECUTED, 8); }

    static boolean supportsBreaks() { return (FEATURES & FEATURE_BREAKS) != 0; }

    /**
     * Adds a stop address (a block start): the engine stops before the block there runs. The check
     * is made when Unicorn translates that block, so the block is dropped from Unicorn's cache now
     * and after every stop there ({@link #takeBreakHit}, {@link #afterSlice}).
     */
    void addBreak(long address) {
        if (listBreak(address)) dropNewBreak(address);
    }

    /**
     * Adds several stop addresses as {@link #addBreak} does, with one flush of the whole
     * translation cache for all the user-space ones (a uprobe's mapping event places many).
     */
    void addBreaks(long[] addresses) {
        boolean user = false;
        for (long a : addresses) {
            if (!listBreak(a)) continue;
            if (a >= 0) user = true;
            else dropBlockAt(a);
        }
        if (user) {
            uc.flushTranslationCache();
            forgetBlocks();
        }
    }

    /** Lists {@code address} as a stop address; false when it already was. */
    private boolean listBreak(long address) {
        if (!supportsBreaks()) {
            throw new IllegalStateException("libkpemu_clock.so predates native breakpoints; rebuild it with scripts/fetch-natives.sh");
        }
        int n = state.get(JAVA_INT, NBREAKS);
        if (breakMayBe(address)) {
            for (int i = 0; i < n; i++) if (state.get(JAVA_LONG, BREAKS + 8L * i) == address) return false;
        }
        if (n == MAX_BREAKS) throw new IllegalStateException("more than " + MAX_BREAKS + " host breakpoints");
        state.set(JAVA_LONG, BREAKS + 8L * n, address);
        setBreakBit(address);
        state.set(JAVA_INT, NBREAKS, n + 1);
        return true;
    }

    /** Drops what Unicorn translated at a new stop address. */
    private void dropNewBreak(long address) {
        if (address >= 0) {
            // a user-space address (a uprobe): the current page tables may not map it (Unicorn's
            // removal looks the address up through them), and a block translated there for
            // another address space of the same page must go too: drop every block
            uc.flushTranslationCache();
            forgetBlocks();
            return;
        }
        dropBlockAt(address);
    }

    /**
     * Drops Unicorn's translations of the block at {@code address}, so the guest's next arrival is
     * translated, and checked, again. Unicorn finds the block through the current address space
     * and privilege (a kernel address is mapped the same in every process); from user mode a
     * kernel address does not translate, and from kernel mode a user address does not either for
     * an instruction fetch (arm64 PXN, x86 SMEP: a slice resumed from a uprobe whose block ended
     * in an exception stops in the kernel), and Unicorn then silently drops nothing, so then every
     * translation goes.
     */
    private void dropBlockAt(long address) {
        if ((address < 0) == userModePc()) {
            uc.flushTranslationCache();
            forgetBlocks();
            return;
        }
        uc.removeTranslationCache(address, address + 1);
    }

    private long currentPc;

    /** True when the last slice ended at a user-space (lower-half) address. */
    private boolean userModePc() { return currentPc >= 0; }

    /**
     * The granule bitmap of the text guard's ranges (created, and given to the translation hook, on
     * first use).
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
        removeMid(address);
        int n = state.get(JAVA_INT, NBREAKS);
        for (int i = 0; i < n; i++) {
            if (state.get(JAVA_LONG, BREAKS + 8L * i) != address) continue;
            state.set(JAVA_LONG, BREAKS + 8L * i, state.get(JAVA_LONG, BREAKS + 8L * (n - 1)));
            state.set(JAVA_INT, NBREAKS, n - 1);
            // a hit not yet taken names its break by index: the removed one's is void, the moved
            // last one's is now i
            int hit = state.get(JAVA_INT, BREAK_HIT);
            if (hit == i + 1) state.set(JAVA_INT, BREAK_HIT, 0);
            else if (hit == n) state.set(JAVA_INT, BREAK_HIT, i + 1);
            rebuildBreakBits();
            if (state.get(JAVA_LONG, SKIP_ONCE) == address) state.set(JAVA_LONG, SKIP_ONCE, 0);
            return;
        }
    }

    // ------------------------------------------------------------------ instruction stops

    /** Granules of the mids (created, and given to the translation hook, on first use). */
    private GranuleBitmap midGranules;
    /** The mids, as the native list holds them (for removal and the granule counts). */
    private final java.util.Set<Long> mids = new java.util.HashSet<>();
    /** A mid the next slice stops at: it runs the one block before it with the mid as its exit (0: none). */
    private long splitAt;

    static boolean supportsMids() { return MAX_MIDS > 0; }

    /**
     * Adds stop addresses that need not start a block ({@link Machine#addInstructionBreakpoints}): each
     * is also a break (for the blocks that start there); a block translated with one strictly
     * inside it stops before it runs ({@link #takeMidHit}). Drops every translation, as a new user
     * break does: a block translated before holds the address unseen.
     */
    void addMids(long[] addresses) {
        if (!supportsMids()) {
            throw new IllegalStateException("libkpemu_clock.so predates instruction stops; rebuild it with scripts/fetch-natives.sh");
        }
        if (midGranules == null) {
            midGranules = new GranuleBitmap(MID_BITMAP_BITS);
            state.set(ADDRESS, MID_BITS, midGranules.nativeBits());
        }
        boolean added = false;
        for (long a : addresses) {
            if (!mids.add(a)) continue;
            int n = state.get(JAVA_INT, NMIDS);
            if (n == MAX_MIDS) throw new IllegalStateException("more than " + MAX_MIDS + " instruction stops");
            state.set(JAVA_LONG, MIDS + 8L * n, a);
            state.set(JAVA_INT, NMIDS, n + 1);
            midGranules.mark(a, 1, 1);
            added = true;
        }
        for (long a : addresses) listBreak(a);
        if (added) {
            // one flush for them all: a block translated before holds a new mid unseen
            uc.flushTranslationCache();
            forgetBlocks();
        }
    }

    private void removeMid(long address) {
        if (!mids.remove(address)) return;
        int n = state.get(JAVA_INT, NMIDS);
        for (int i = 0; i < n; i++) {
            if (state.get(JAVA_LONG, MIDS + 8L * i) != address) continue;
            state.set(JAVA_LONG, MIDS + 8L * i, state.get(JAVA_LONG, MIDS + 8L * (n - 1)));
            state.set(JAVA_INT, NMIDS, n - 1);
            break;
        }
        midGranules.mark(address, 1, -1);
        if (state.get(JAVA_LONG, MID_HIT) == address) state.set(JAVA_LONG, MID_HIT, 0);
        if (splitAt == address) splitAt = 0;
    }

    /**
     * After a slice: the mid inside the block the engine stopped before, or -1 (and clears it). The
     * block there is dropped (Unicorn translated it whole), and the next slice ({@link #takeSplit})
     * runs it alone up to the mid.
     */
    long takeMidHit(long blockStart) {
        if (MID_HIT < 0) return -1;
        long mid = state.get(JAVA_LONG, MID_HIT);
        if (mid == 0) return -1;
        state.set(JAVA_LONG, MID_HIT, 0);
        dropBlockAt(blockStart);
        splitAt = mid;
        return mid;
    }

    /**
     * After a split slice stopped at its mid: x86's translator counts the exit it stopped at as one
     * more instruction of the block (the halt it emits there; arm64's block size does not include
     * it), which never ran: uncharged, so a run with instruction breakpoints counts what runs
     * without them.
     */
    void unchargeExitStop() {
        if (state.get(JAVA_INT, ARM64) == 0) state.set(JAVA_LONG, EXECUTED, executed() - 1);
    }

    /** The mid the coming slice must stop at (its exit), or 0; the slice runs one block. Clears it. */
    long takeSplit() {
        long s = splitAt;
        splitAt = 0;
        return s;
    }

    /**
     * The break address that stopped the last slice, or -1 (and clears it). The block there is
     * dropped: Unicorn translated it when the engine stopped, and only a new translation stops again.
     */
    long takeBreakHit() {
        arrivalPc = 0;
        int hit = state.get(JAVA_INT, BREAK_HIT);
        if (hit == 0) return -1;
        state.set(JAVA_INT, BREAK_HIT, 0);
        if (HIT_PREV >= 0) {
            arrivalPc = state.get(JAVA_LONG, HIT_PREV);
            arrivalSize = state.get(JAVA_LONG, HIT_PREV + 8);
            state.set(JAVA_LONG, HIT_PREV, 0);
        } else {
            arrivalPc = 0;
        }
        long address = state.get(JAVA_LONG, BREAKS + 8L * (hit - 1));
        dropBlockAt(address);
        return address;
    }

    /** The block that ran just before the last break hit's block (Unicorn's previous block), 0: not known. */
    private long arrivalPc, arrivalSize;

    /** The start of the block the guest ran just before the last break hit, or 0 when not known (a hit at a slice's start, an instruction stop). */
    long arrivalBlock() { return arrivalPc; }

    /** That block's size in bytes. */
    long arrivalBlockSize() { return arrivalSize; }

    /** A slice that starts at the break address it resumes from (0: none): it runs that one block. */
    private long resumingAt;

    /**
     * Before a slice that starts at {@code pc}: true when a break there stops it before anything
     * runs (as {@link #takeBreakHit} then reports). The translation hook cannot be relied on for the
     * slice's first block: Unicorn may still hold it translated, and never reports the first block
     * of the engine's life. A slice that resumes from the break (skip-once) runs just that block.
     */
    boolean stopsBefore(long pc) {
        int n = state.get(JAVA_INT, NBREAKS);
        if (n == 0 || !breakMayBe(pc)) return false;
        for (int i = 0; i < n; i++) {
            if (state.get(JAVA_LONG, BREAKS + 8L * i) != pc) continue;
            if (state.get(JAVA_LONG, SKIP_ONCE) == pc) {
                resumingAt = pc;
                return false;
            }
            state.set(JAVA_INT, BREAK_HIT, i + 1);
            if (HIT_PREV >= 0) state.set(JAVA_LONG, HIT_PREV, 0);     // stopped before running: no block is known to have led here
            return true;
        }
        return false;
    }

    /**
     * After every slice, with the PC it ended at: when the slice resumed from a break address (the
     * block there ran once, translated without stopping, and the slice ended after it), that block
     * is dropped so the guest's next arrival stops again.
     */
    void afterSlice(long pc) {
        currentPc = pc;
        long resumed = state.get(JAVA_LONG, RESUMED_BREAK);
        if (resumingAt != 0) {
            if (state.get(JAVA_LONG, SKIP_ONCE) == resumingAt) state.set(JAVA_LONG, SKIP_ONCE, 0);
            resumed = resumingAt;
            resumingAt = 0;
        }
        if (resumed == 0) return;
        state.set(JAVA_LONG, RESUMED_BREAK, 0);
        dropBlockAt(resumed);
    }

    /** The next time the block at {@code address} is translated, do not stop there. */
    void skipBreakOnce(long address) { state.set(JAVA_LONG, SKIP_ONCE, address); }

    /**
     * Arms a slice: stop before a block that would pass {@code executed() + n} (after the first
     * block when the slice resumes from a break: {@link #stopsBefore}).
     */
    void arm(long n) {
        if (resumingAt != 0) n = 1;     // the first block always runs: just the one at the break
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
     * From now on the translation hook checks {@code guardState} (a {@link TextGuard}'s native
     * table), looking up a block's page only when the {@link #granules} bitmap has a bit set for
     * one of its granules.
     */
    void attachGuard(MemorySegment guardState) {
        if ((FEATURES & FEATURE_GUARD) == 0) {
            throw new IllegalStateException("libkpemu_clock.so predates the text guard; rebuild it with scripts/fetch-natives.sh");
        }
        granules();
        state.set(java.lang.foreign.ValueLayout.ADDRESS, GUARD, guardState);
    }

    /**
     * Another vCPU's clock: its translation hook checks the same guarded text ({@code guardState})
     * through the same granule bitmap, which {@code owner} (the first vCPU's clock) keeps and frees.
     */
    void shareGuard(InstructionClock owner, MemorySegment guardState) {
        if ((FEATURES & FEATURE_GUARD) == 0) {
            throw new IllegalStateException("libkpemu_clock.so predates the text guard; rebuild it with scripts/fetch-natives.sh");
        }
        state.set(java.lang.foreign.ValueLayout.ADDRESS, GUARD_BITS, owner.granules().nativeBits());
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

    /** The live-time fields (instr_offset, idle_nanos, nanos_per_instr) of the native state, else null. */
    MemorySegment liveTimeFields(double nanosPerInstruction) {
        MemorySegment s = liveTimeState(nanosPerInstruction);
        return s == null ? null : s.asSlice(LIVE_TIME, 24);
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
        closeMidGranules();
    }

    /** Frees the mids' granule bitmap (once the engine is closed). */
    void closeMidGranules() {
        if (midGranules != null) midGranules.close();
        midGranules = null;
    }

    Unicorn.Hook hook() { return hook; }
}
