package dev.kpemu.kprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.Schedule;
import dev.kpemu.machine.StopReason;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.X86Reg;

/**
 * kprobes on several vCPUs (issue 26, docs/smp-notes.md step 5), bare metal on the kprobes test
 * guests with vCPUs added ({@link Guest#startCpu}): every vCPU runs the same loop calling a probed
 * function, so hits on one vCPU fall while another is between a hit and the end of its out-of-line
 * step. Linux keeps the kprobe control block per CPU, so every such hit is an ordinary hit: hits =
 * N × K and {@code nmissed} = 0, under the default schedule and under quanta of a few instructions
 * (which the test shows do end mid-step). kretprobe instances come from one pool shared by the
 * CPUs: the expected misses are computed here from Linux's rule for the default {@code maxactive}.
 */
class SmpKprobesTest {
    static final long BUDGET = 500_000_000L;

    /** The schedules of the hit test: the default round-robin, quanta of 1 and 3 instructions, two seeds. */
    static List<Schedule> schedules() {
        return List.of(Schedule.of(Schedule.DEFAULT_SEED), Schedule.roundRobin(1), Schedule.roundRobin(3), Schedule.of(1), Schedule.of(42));
    }

    static Stream<Arguments> hitCases() {
        List<Arguments> out = new ArrayList<>();
        for (Arch a : Arch.values()) for (int n : new int[] {1, 2, 4}) out.add(Arguments.of(a, n));
        return out.stream();
    }

    /** N vCPUs × K calls of {@code kprobe_target}, probed on its divide (stepped out of line, boosting off). */
    @ParameterizedTest(name = "{0}, {1} vCPUs")
    @MethodSource("hitCases")
    void everyVcpuHitIsTakenWhileOthersAreMidStep(Arch arch, int n) {
        int k = 300;
        for (Schedule schedule : schedules()) {
            try (Guest g = Guest.create(arch)) {
                Machine m = g.machine;
                long driver = g.writeLoopCalling(g.sym("kprobe_target"), k);
                Kprobes kp = g.kprobes().boosting(false);
                long[] pre = new long[n], post = new long[n];
                Kprobe probe = Kprobe.at(g.find("kprobe_target", arch == Arch.X86_64 ? "div" : "udiv"))
                        .pre((p, r) -> { pre[m.cpu()]++; return 0; })
                        .post((p, r, f) -> post[m.cpu()]++);
                kp.register(probe);
                g.startAll(n, driver);
                m.setSchedule(schedule);
                int[] midStep = {0};
                m.setSwitchObserver((cpu, pc, q) -> { if (g.slots.contains(pc)) midStep[0]++; });

                StopReason s = m.run(BUDGET);

                String what = arch + ", " + n + " vCPUs, schedule " + describe(schedule);
                assertInstanceOf(StopReason.Halted.class, s, what + ": " + s);
                long expectedSum = 0;
                for (int i = 1; i <= k; i++) expectedSum += i / 3;
                for (int cpu = 0; cpu < n; cpu++) {
                    assertEquals(k, pre[cpu], what + ": pre handlers on vCPU " + cpu);
                    assertEquals(k, post[cpu], what + ": post handlers (steps finished) on vCPU " + cpu);
                    assertEquals(expectedSum, m.engine(cpu).regRead(sumRegister(arch)), what + ": the stepped divides' results on vCPU " + cpu);
                    if (n > 1) assertEquals(Machine.CpuState.HALTED, m.cpuState(cpu), what);   // (one vCPU: the old loop, no run state)
                }
                assertEquals(0, probe.nmissed(), what + ": nmissed");
                assertTrue(!m.interruptsHeld(), what + ": no step left in flight");
                if (n > 1 && schedule.roundRobin() && schedule.quantum() <= 3)
                    assertTrue(midStep[0] > 0, what + ": some quantum ended between a hit and its step's end");
            }
        }
    }

    /**
     * Reentry stays per CPU: vCPU 1's pre handler calls the probed function again (as Linux's KUnit
     * {@code test_kprobe_missed}), so that nested hit, on the same vCPU, is missed and runs no
     * handler; vCPU 0's hits, also while vCPU 1 is in its step, are not. The default schedule only:
     * the fixture's nested run ({@link GuestFunctionCall}) stops at the vCPU's quantum deadline, so
     * a quantum of a few instructions ends it before it returns.
     */
    @ParameterizedTest(name = "{0}")
    @org.junit.jupiter.params.provider.EnumSource(Arch.class)
    void reentryOnTheSameVcpuIsMissedAndOnAnotherIsNot(Arch arch) {
        int k = 100;
        for (Schedule schedule : List.of(Schedule.of(Schedule.DEFAULT_SEED))) {
            try (Guest g = Guest.create(arch)) {
                Machine m = g.machine;
                long fn = g.sym("kprobe_target");
                long driver = g.writeLoopCalling(fn, k);
                g.startAll(2, driver);
                Kprobes kp = g.kprobes().boosting(false);
                GuestFunctionCall call = GuestFunctionCall.on(kp);
                long[] pre = new long[2], nested = {0};
                Kprobe probe = Kprobe.at(g.find("kprobe_target", arch == Arch.X86_64 ? "div" : "udiv")).pre((p, r) -> {
                    pre[m.cpu()]++;
                    if (m.cpu() == 1) nested[0] += call.call(fn, 9);          // 9 / 3 = 3, its own hit missed
                    return 0;
                });
                kp.register(probe);
                m.setSchedule(schedule);

                StopReason s = m.run(BUDGET);

                String what = arch + ", schedule " + describe(schedule);
                assertInstanceOf(StopReason.Halted.class, s, what + ": " + s);
                assertEquals(k, pre[0], what + ": vCPU 0's hits");
                assertEquals(k, pre[1], what + ": vCPU 1's outer hits (its nested ones run no handler)");
                assertEquals(3L * k, nested[0], what + ": the nested calls ran the stepped divide");
                assertEquals(k, probe.nmissed(), what + ": one miss per nested call, all on vCPU 1");
            }
        }
    }

    static Stream<Arguments> kretprobeCases() {
        List<Arguments> out = new ArrayList<>();
        for (Arch a : Arch.values()) {
            out.add(Arguments.of(a, 4, 0, 2));     // explicit maxactive below the concurrency
            out.add(Arguments.of(a, 4, 2, 0));     // default: max(10, 8) = 10 of 12 entries
            out.add(Arguments.of(a, 6, 2, 0));     // default: max(10, 12) = 12 of 18 entries (the 2N term)
            out.add(Arguments.of(a, 1, 11, 0));    // one vCPU: 10 of 12 entries, as before
        }
        return out.stream();
    }

    /** Linux's default {@code maxactive} ({@code register_kretprobe}, 6.1 with CONFIG_PREEMPTION and every kernel from 6.2). */
    static int linuxDefaultMaxactive(int possibleCpus) { return Math.max(10, 2 * possibleCpus); }

    /**
     * N vCPUs each enter a recursive function {@code depth + 1} times and wait at the bottom until all
     * N are there, so every entry happens before any return: with a pool of {@code maxactive}
     * instances shared by the CPUs, {@code max(0, N(depth + 1) - maxactive)} entries miss and the
     * others' return handlers run, on whichever vCPU returns.
     */
    @ParameterizedTest(name = "{0}, {1} vCPUs, depth {2}, maxactive {3}")
    @MethodSource("kretprobeCases")
    void kretprobeInstancesComeFromOneSharedPool(Arch arch, int n, int depth, int maxactive) {
        for (Schedule schedule : List.of(Schedule.of(Schedule.DEFAULT_SEED), Schedule.roundRobin(3), Schedule.of(1))) {
            try (Guest g = Guest.create(arch)) {
                Machine m = g.machine;
                long rec = g.loopCode() + 0x400, driver = rec + 0x200;
                long counter = g.dataVa + 0x1000;
                m.memory().write(g.physical(rec), g.asm(barrierRecursion(arch, counter, n), rec));
                m.memory().write(g.physical(driver), g.asm(callOnce(arch, rec, depth), driver));
                g.functions.put("barrier_rec", rec);
                g.startAll(n, driver);                        // the vCPUs first: they are the possible CPUs at registration
                Kprobes kp = g.kprobes();
                long[] returns = new long[n];
                Kretprobe rp = Kretprobe.at("barrier_rec").maxactive(maxactive).handler((ri, r) -> { returns[m.cpu()]++; return 0; });
                kp.register(rp);
                m.setSchedule(schedule);

                StopReason s = m.run(BUDGET);

                String what = arch + ", " + n + " vCPUs, depth " + depth + ", maxactive " + maxactive + ", schedule " + describe(schedule);
                assertInstanceOf(StopReason.Halted.class, s, what + ": " + s);
                int pool = maxactive > 0 ? maxactive : linuxDefaultMaxactive(n);
                int entries = n * (depth + 1);
                assertEquals(pool, rp.maxactive(), what + ": maxactive after registration");
                assertEquals(Math.max(0, entries - pool), rp.nmissed(), what + ": nmissed");
                long returned = 0;
                for (long r : returns) returned += r;
                assertEquals(Math.min(entries, pool), returned, what + ": return handlers");
                assertEquals(0, kp.outstandingInstances(), what + ": every instance back in the pool");
                if (n > 1) for (int cpu = 0; cpu < n; cpu++) assertEquals(Machine.CpuState.HALTED, m.cpuState(cpu), what + ": vCPU " + cpu + " returned to its driver");
                assertEquals(n, m.memory().readLong(g.physical(counter)), what);
            }
        }
    }

    // ------------------------------------------------------------------ guest code

    static int sumRegister(Arch arch) { return arch == Arch.X86_64 ? X86Reg.R13 : Arm64Reg.X21; }

    /** Calls {@code rec(depth)} once, then halts for good. */
    static String callOnce(Arch arch, long rec, int depth) {
        return switch (arch) {
            case X86_64 -> "mov $" + depth + ", %rdi\n movabs $" + rec + ", %rax\n call *%rax\n2: cli\n hlt\n jmp 2b\n";
            case ARM64 -> "mov x29, sp\n mov x0, #" + depth + "\n" + Arm64Guest.mov64("x20", rec) + "blr x20\nidle:\n wfi\n b idle\n";
        };
    }

    /** {@code rec(d)}: a frame, {@code rec(d - 1)} while d > 0; at the bottom an atomic increment of {@code counter}, then a wait until it is {@code n}. */
    static String barrierRecursion(Arch arch, long counter, int n) {
        return switch (arch) {
            case X86_64 -> """
                    rec:
                    push %rbp
                    mov %rsp, %rbp
                    test %rdi, %rdi
                    jz 3f
                    dec %rdi
                    call rec
                    jmp 5f
                    3: movabs $COUNTER, %r11
                    lock incq (%r11)
                    4: pause
                    cmpq $N, (%r11)
                    jne 4b
                    5: pop %rbp
                    ret
                    """.replace("COUNTER", Long.toString(counter)).replace("N", Integer.toString(n));
            case ARM64 -> "rec:\n stp x29, x30, [sp, #-16]!\n mov x29, sp\n cbz x0, bottom\n sub x0, x0, #1\n bl rec\n b out\n"
                    + "bottom:\n" + Arm64Guest.mov64("x9", counter)
                    + "inc:\n ldxr x10, [x9]\n add x10, x10, #1\n stxr w11, x10, [x9]\n cbnz w11, inc\n"
                    + "wait:\n ldr x10, [x9]\n cmp x10, #" + n + "\n b.ne wait\n"
                    + "out:\n ldp x29, x30, [sp], #16\n ret\n";
        };
    }

    static String describe(Schedule s) {
        return s.roundRobin() ? "round-robin " + s.quantum() : "seed " + s.seed();
    }
}
