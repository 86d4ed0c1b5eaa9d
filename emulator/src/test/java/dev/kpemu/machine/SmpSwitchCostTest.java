package dev.kpemu.machine;

import static dev.kpemu.machine.SmpGuest.DATA;
import static dev.kpemu.machine.SmpGuest.FUNC;
import static dev.kpemu.machine.SmpGuest.LOOP;
import static dev.kpemu.machine.SmpGuest.NEVER;
import static dev.kpemu.machine.SmpGuest.RAM;
import static dev.kpemu.machine.SmpGuest.RAM_SIZE;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import java.util.Locale;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * What switching vCPUs costs (issue 26): engines A and B run in turn for quanta of N guest
 * instructions, ended by Unicorn's {@code count} or by kpemu's {@link InstructionClock}, against
 * one engine running the same quanta alone; and what the coherence remedies cost per call. The
 * figures are printed (lines starting {@code SMP-FACT}), never asserted: the tests assert that every
 * quantum ran exactly N instructions (the loop counters). Size with
 * {@code -Dkpemu.smp.instructions=} (per measurement, default 1,000,000) and
 * {@code -Dkpemu.smp.repeats=} (median of, default 1); times are the thread's CPU time;
 * docs/smp-notes.md has the figures.
 */
class SmpSwitchCostTest {
    private static final long TOTAL = Long.getLong("kpemu.smp.instructions", 1_000_000);
    private static final int REPEATS = Integer.getInteger("kpemu.smp.repeats", 1);
    private static final long[] QUANTA = {1_000, 10_000, 100_000};

    /**
     * Four instructions per iteration, one block: counter += 1; copy it to a register, or store it
     * to the vCPU's word in shared RAM ({@code stores}); down-count; branch.
     */
    private static String loop(SmpGuest g, boolean stores) {
        return g == SmpGuest.X86
                ? "top: add $1, %rax\n" + (stores ? "mov %rax, (%rbx)" : "mov %rax, %rdx") + "\n dec %rcx\n jnz top\n hlt"
                : "top: add x0, x0, #1\n" + (stores ? "str x0, [x1]" : "mov x3, x0") + "\n subs x2, x2, #1\n b.ne top\n brk #0";
    }

    /** A vCPU for the measurement: an engine at the loop, its own data word, and optionally the clock. */
    private static final class Cpu implements AutoCloseable {
        final SmpGuest g;
        final Unicorn uc;
        final InstructionClock clock;
        final long data;
        long pc = LOOP, executed;
        boolean stores;

        Cpu(SmpGuest g, HostRam ram, int index, boolean withClock) {
            this.g = g;
            uc = g.engine(ram);
            clock = withClock ? new InstructionClock(uc, g == SmpGuest.ARM64) : null;
            stores = storing;
            data = DATA + 64L * index;
            if (g == SmpGuest.X86) {
                uc.regWrite(X86Reg.RAX, 0);
                uc.regWrite(X86Reg.RBX, data);
                uc.regWrite(X86Reg.RCX, 1L << 50);
            } else {
                uc.regWrite(Arm64Reg.X0, 0);
                uc.regWrite(Arm64Reg.X1, data);
                uc.regWrite(Arm64Reg.X2, 1L << 50);
            }
        }

        /** One quantum of {@code n} instructions. */
        void quantum(long n) {
            if (clock != null) {
                long before = clock.executed();
                clock.arm(n);
                uc.start(pc, NEVER, 0, 0);
                executed += clock.executed() - before;
            } else {
                uc.start(pc, NEVER, 0, n);
                executed += n;
            }
            pc = uc.regRead(g.pc());
        }

        /** The loop counter: iterations run, each 4 instructions. */
        long counter() { return uc.regRead(g.result()); }

        @Override public void close() {
            uc.close();
            if (clock != null) clock.close();
        }
    }

    /** Instructions per second of {@code cpus} run in turn, quanta of {@code n}, TOTAL instructions in all. */
    private static double run(SmpGuest g, HostRam ram, int cpus, boolean withClock, long n) {
        double[] rates = new double[REPEATS];
        for (int r = 0; r < REPEATS; r++) {
            Cpu[] cpu = new Cpu[cpus];
            try {
                for (int i = 0; i < cpus; i++) cpu[i] = new Cpu(g, ram, i, withClock);
                for (Cpu c : cpu) c.quantum(n);          // translation out of the timed part
                long rounds = Math.max(1, TOTAL / n / cpus);
                long t0 = cpuNanos();
                for (long k = 0; k < rounds; k++) for (Cpu c : cpu) c.quantum(n);
                long dt = cpuNanos() - t0;
                for (Cpu c : cpu) {
                    assertEquals((rounds + 1) * n, c.executed, "every quantum ran exactly n instructions");
                    assertEquals(c.executed / 4, c.counter(), "the loop counter agrees");
                    if (c.stores) assertEquals(c.counter(), c.uc.memReadLong(c.data), "the counter's last store is in shared RAM");
                    assertEquals(LOOP, c.pc, "quanta of whole iterations end at the loop head");
                }
                rates[r] = rounds * n * cpus / (dt / 1e9);
            } finally {
                for (Cpu c : cpu) if (c != null) c.close();
            }
        }
        Arrays.sort(rates);
        return rates[REPEATS / 2];
    }

    /**
     * The loop run free, no count and no clock: TOTAL / 4 iterations to the instruction after it
     * ({@code until}), the engine's own speed on this loop.
     */
    private static double free(SmpGuest g, HostRam ram, long loopEnd) {
        double[] rates = new double[REPEATS];
        for (int r = 0; r < REPEATS; r++) {
            try (Cpu c = new Cpu(g, ram, 0, false)) {
                c.uc.regWrite(g == SmpGuest.X86 ? X86Reg.RCX : Arm64Reg.X2, 1000);
                c.uc.start(LOOP, loopEnd, 0, 0);      // translation out of the timed part
                c.uc.regWrite(g == SmpGuest.X86 ? X86Reg.RCX : Arm64Reg.X2, TOTAL / 4);
                c.uc.regWrite(g.result(), 0);
                long t0 = cpuNanos();
                c.uc.start(LOOP, loopEnd, 0, 0);
                long dt = cpuNanos() - t0;
                assertEquals(TOTAL / 4, c.counter());
                rates[r] = TOTAL / (dt / 1e9);
            }
        }
        Arrays.sort(rates);
        return rates[REPEATS / 2];
    }

    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void switchingCostOfARegisterLoop(SmpGuest g) {
        switchingCost(g, false);
    }

    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void switchingCostOfAStoreLoop(SmpGuest g) {
        switchingCost(g, true);
    }

    private static boolean storing;

    private static void switchingCost(SmpGuest g, boolean stores) {
        storing = stores;
        try (HostRam ram = HostRam.allocate(RAM_SIZE)) {
            g.load(ram.segment());
            byte[] code = g.asm(loop(g, stores), LOOP);
            SmpGuest.put(ram.segment(), LOOP, code);
            long loopEnd = LOOP + code.length - (g == SmpGuest.X86 ? 1 : 4);
            print(g, stores ? "STORE LOOP" : "REGISTER LOOP");
            print(g, "one engine, %,d instructions: free (no count, no clock) %.0f M/s; one quantum: count %.0f M/s, clock %.0f M/s", TOTAL,
                    free(g, ram, loopEnd) / 1e6, run(g, ram, 1, false, TOTAL) / 1e6, run(g, ram, 1, true, TOTAL) / 1e6);
            for (long n : QUANTA) {
                double countAlone = run(g, ram, 1, false, n), countPair = run(g, ram, 2, false, n);
                double clockAlone = run(g, ram, 1, true, n), clockPair = run(g, ram, 2, true, n);
                print(g, "N=%,d: count alone %.0f M/s, A/B %.0f M/s (%.2fx); clock alone %.0f M/s, A/B %.0f M/s (%.2fx)", n,
                        countAlone / 1e6, countPair / 1e6, countAlone / countPair,
                        clockAlone / 1e6, clockPair / 1e6, clockAlone / clockPair);
            }
        }
    }

    /** The coherence remedies' cost per call, and (arm64) clearing the exclusive monitor. */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void remedyCosts(SmpGuest g) {
        int calls = (int) Math.max(1_000, TOTAL / 100);
        try (HostRam ram = HostRam.allocate(RAM_SIZE)) {
            g.load(ram.segment());
            try (Unicorn b = g.engine(ram)) {
                // exits mode: a run's return drops no block (a plain `until` drops the block holding
                // until - 1, the caller's, so every call would translate it again)
                b.useExits(true);
                assertEquals(1, g.callFunction(b));
                double call = perCall(calls, () -> g.callFunction(b));
                double removeEmpty = perCall(calls, () -> b.removeTranslationCache(DATA, DATA + 8));
                double removeRam = perCall(calls, () -> b.removeTranslationCache(DATA, RAM + RAM_SIZE));
                double removeAndCall = perCall(calls, () -> {
                    b.removeTranslationCache(FUNC, FUNC + 8);
                    g.callFunction(b);
                });
                double flushAndCall = perCall(calls, () -> {
                    b.flushTranslationCache();
                    g.callFunction(b);
                });
                assertEquals(1, g.callFunction(b));
                print(g, "per call: guest call run alone %.2f us; TB_REMOVE_CACHE of 8 bytes holding no block %.2f us, "
                        + "of %d pages holding none %.2f us; TB_REMOVE_CACHE of the function + the call %.2f us; TB_FLUSH + the call %.2f us",
                        call, removeEmpty, (RAM + RAM_SIZE - DATA) >> 12, removeRam, removeAndCall, flushAndCall);
            }
            if (g == SmpGuest.ARM64) {
                long offset = ExclusivesAcrossEnginesTest.exclusiveAddressOffset();
                SmpGuest.put(ram.segment(), SmpGuest.SCRATCH, g.asm("clrex\n nop", SmpGuest.SCRATCH));
                try (Unicorn a = g.engine(ram)) {
                    a.useExits(true);
                    double clrex = perCall(calls, () -> a.start(SmpGuest.SCRATCH, SmpGuest.SCRATCH + 4, 0, 1));
                    double patch = perCall(calls, () -> ExclusivesAcrossEnginesTest.clearByContext(a, offset));
                    Unicorn.Context c = a.contextAlloc();
                    double patchKept = perCall(calls, () -> {
                        a.contextSave(c);
                        c.blob().set(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, offset, -1L);
                        a.contextRestore(c);
                    });
                    c.close();
                    print(g, "clearing the exclusive monitor: a CLREX run %.2f us; context alloc+save+patch+restore+free %.2f us, "
                            + "save+patch+restore of a kept context %.2f us (context %d bytes, monitor word at +%d)",
                            clrex, patch, patchKept, a.contextSize(), offset);
                }
            }
        }
    }

    private static double perCall(int calls, Runnable r) {
        for (int i = 0; i < Math.min(calls, 1000); i++) r.run();
        double[] us = new double[REPEATS];
        for (int k = 0; k < REPEATS; k++) {
            long t0 = cpuNanos();
            for (int i = 0; i < calls; i++) r.run();
            us[k] = (cpuNanos() - t0) / 1e3 / calls;
        }
        Arrays.sort(us);
        return us[REPEATS / 2];
    }

    /**
     * This thread's CPU time: the machine has two cores and other jobs run on it, so wall time
     * would measure them too.
     */
    private static long cpuNanos() { return THREADS.getCurrentThreadCpuTime(); }

    private static final java.lang.management.ThreadMXBean THREADS = java.lang.management.ManagementFactory.getThreadMXBean();

    private static void print(SmpGuest g, String format, Object... args) {
        System.out.println("SMP-FACT " + g + " " + String.format(Locale.ROOT, format, args));
    }
}
