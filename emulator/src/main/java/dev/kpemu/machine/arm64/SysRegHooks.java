package dev.kpemu.machine.arm64;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.util.Optional;

import dev.kpemu.natives.NativeLibraries;
import dev.kpemu.unicorn.Unicorn;

/**
 * MRS/MSR hooks for one group of system registers. Unicorn calls an MRS/MSR hook for every
 * such instruction, and Linux executes millions (SP_EL0 holds {@code current}, TPIDR_EL1 the
 * per-CPU offset: 2.1 M of the 2.5 M in one boot), so a Java upcall for each costs seconds.
 * With the native filter in {@code kpemu_clock.c} the engine calls a C function that returns
 * "not handled" for registers outside the group and forwards only the group to the Java hook;
 * with an older library without it, the Java hook is installed directly (correct, slower).
 */
public final class SysRegHooks {
    private static final long FORWARD = 0, FORWARD_DATA = 8, OP0 = 16, OP1 = 20, CRN = 24, SEEN = 32, FORWARDED = 40;
    private static final MemorySegment FILTER;
    private static final long FILTER_SIZE;
    /** Offset of {@code counter_clock} (then {@code nanos_per_tick}, {@code counter_reads}), or -1. */
    private static final long COUNTER;

    static {
        SymbolLookup lib = NativeLibraries.load(NativeLibraries.CLOCK);
        Optional<MemorySegment> f = lib.find("kpemu_sysreg_filter");
        long sz = NativeLibraries.constant(lib, "kpemu_sysreg_filter_size");
        FILTER = f.isPresent() && sz > 0 ? f.get() : null;
        FILTER_SIZE = FILTER != null ? sz : 0;
        COUNTER = FILTER != null ? NativeLibraries.constant(lib, "kpemu_sysreg_filter_counter_offset") : -1;
    }

    /** An installed hook; {@link #seen()} counts every MRS/MSR the engine reported. */
    public static final class Installed {
        private final Unicorn.Hook hook;
        private final MemorySegment state;     // null without the native filter
        private long javaCalls;

        private Installed(Unicorn.Hook hook, MemorySegment state) {
            this.hook = hook;
            this.state = state;
        }

        public boolean filtered() { return state != null; }

        /** MRS/MSR instructions the engine reported (with the filter), else Java calls. */
        public long seen() { return state != null ? state.get(JAVA_LONG, SEEN) : javaCalls; }

        /** Calls that reached the Java hook. */
        public long forwarded() { return state != null ? state.get(JAVA_LONG, FORWARDED) : javaCalls; }

        /** System-counter reads the native filter answered (see {@link #installWithCounter}). */
        public long counterReads() { return state != null && COUNTER >= 0 ? state.get(JAVA_LONG, COUNTER + 16) : 0; }

        public Unicorn.Hook hook() { return hook; }
    }

    private SysRegHooks() {}

    /** True when the loaded native library has the filter. */
    public static boolean nativeFilter() { return FILTER != null; }

    /**
     * Hooks {@code insn} ({@link Unicorn#ARM64_INS_MRS} or {@link Unicorn#ARM64_INS_MSR}) for the
     * registers with the given op0, op1 and CRn (-1: any); {@code h} sees only those.
     */
    public static Installed install(Unicorn uc, int insn, int op0, int op1, int crn, Unicorn.SysRegHook h) {
        return installWithCounter(uc, insn, op0, op1, crn, h, null, 0);
    }

    /**
     * As {@link #install}, and MRS of the system counter (CNTPCT_EL0, CNTVCT_EL0) is answered in
     * C, without a Java call, as {@code liveNanos / nanosPerTick} of the machine's clock
     * ({@code liveTime}: {@code Machine.nativeLiveTime()}); null, or a library without it: those
     * reads reach {@code h} like the others. Linux reads CNTVCT_EL0 in every schedule().
     */
    public static Installed installWithCounter(Unicorn uc, int insn, int op0, int op1, int crn, Unicorn.SysRegHook h,
            MemorySegment liveTime, long nanosPerTick) {
        if (FILTER == null) {
            Installed[] self = new Installed[1];
            Unicorn.Hook hk = uc.hookSysReg(insn, (u, reg, acc) -> {
                self[0].javaCalls++;
                if ((op0 >= 0 && acc.op0() != op0) || (op1 >= 0 && acc.op1() != op1) || (crn >= 0 && acc.crn() != crn)) return false;
                return h.onSysReg(u, reg, acc);
            });
            return self[0] = new Installed(hk, null);
        }
        Arena arena = Arena.ofShared();       // the hook's: closed when it is deleted or the engine closed
        MemorySegment stub = uc.sysRegUpcallStub(h, arena);
        MemorySegment state = arena.allocate(FILTER_SIZE, 16);
        state.fill((byte) 0);
        state.set(ADDRESS, FORWARD, stub);
        state.set(ADDRESS, FORWARD_DATA, MemorySegment.NULL);
        state.set(JAVA_INT, OP0, op0);
        state.set(JAVA_INT, OP1, op1);
        state.set(JAVA_INT, CRN, crn);
        if (liveTime != null && COUNTER >= 0 && insn == Unicorn.ARM64_INS_MRS) {
            state.set(ADDRESS, COUNTER, liveTime);
            state.set(JAVA_LONG, COUNTER + 8, nanosPerTick);
        }
        Unicorn.Hook hk = uc.hookInsnNative(insn, FILTER, state, arena, new Object[] {stub, state, h, liveTime});
        return new Installed(hk, state);
    }
}
