package dev.kpemu.optprobes;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.kprobes.Kprobe;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.Schedule;
import dev.kpemu.machine.StopReason;
import dev.kpemu.optprobes.JumpOptimizer.State;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.X86Reg;

/**
 * Jump optimization with several vCPUs (issue 26, docs/smp-notes.md step 5): every vCPU that jumps
 * through an optimized site runs the handlers (the detour's hooks are in every vCPU's engine), and a
 * jump is not written while <em>any</em> vCPU's pc is inside the displaced instructions, not only
 * the current one's.
 */
class SmpOptimizedTest {
    static final int K = 200;

    /** prologue(i) for i = K..1, the results summed (x86 r13, arm64 x21), then halted for good. */
    static Map<String, String> functions(Arch arch) {
        Map<String, String> f = new java.util.LinkedHashMap<>(Functions.basic(arch));
        f.put("driver", switch (arch) {
            case X86_64 -> "mov $" + K + ", %r12\n xor %r13d, %r13d\n"
                    + "1: mov %r12, %rdi\n movabs $prologue, %rax\n call *%rax\n add %rax, %r13\n dec %r12\n jnz 1b\n"
                    + "2: cli\n hlt\n jmp 2b\n";
            case ARM64 -> "mov x29, sp\n mov x19, #" + K + "\n mov x21, #0\n" + mov64("x20", EngineGuest.A_TEXT + 0x100)   // prologue: after halt_stub
                    + "again:\n mov x0, x19\n blr x20\n add x21, x21, x0\n subs x19, x19, #1\n b.ne again\nidle:\n wfi\n b idle\n";
        });
        return f;
    }

    static String mov64(String reg, long v) {
        return String.format("movz %s, #0x%x, lsl #48\nmovk %s, #0x%x, lsl #32\nmovk %s, #0x%x, lsl #16\nmovk %s, #0x%x\n",
                reg, (v >>> 48) & 0xffff, reg, (v >>> 32) & 0xffff, reg, (v >>> 16) & 0xffff, reg, v & 0xffff);
    }

    /** N vCPUs each call the optimized function K times: every call runs the handler, on its own vCPU. */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void everyVcpuRunsTheHandlersThroughTheJump(Arch arch) {
        for (int n : new int[] {2, 4}) {
            for (Schedule schedule : List.of(Schedule.of(Schedule.DEFAULT_SEED), Schedule.roundRobin(1), Schedule.of(7))) {
                try (EngineGuest g = new EngineGuest(arch, functions(arch)); Kprobes k = g.kprobes()) {
                    Machine m = g.machine;
                    long driver = g.sym("driver");
                    assertEquals(EngineGuest.A_TEXT + 0x100, arch == Arch.ARM64 ? g.sym("prologue") : EngineGuest.A_TEXT + 0x100);
                    m.engine().regWrite(arch == Arch.X86_64 ? X86Reg.RSP : Arm64Reg.SP, g.stackTop());
                    m.setPc(driver);
                    for (int cpu = 1; cpu < n; cpu++) assertEquals(cpu, g.startCpu(driver, g.stackTop() - 0x4000L * cpu));
                    JumpOptimizer o = JumpOptimizer.attach(k);
                    long p = g.sym("prologue");
                    long[] hits = new long[n];
                    Kprobe probe = Kprobe.at(p).pre((pr, r) -> { hits[m.cpu()]++; return 0; });
                    k.register(probe);
                    assertEquals(0, o.flush());
                    assertEquals(State.OPTIMIZED, o.state(p));
                    m.setSchedule(schedule);

                    StopReason s = m.run(500_000_000L);

                    String what = arch + ", " + n + " vCPUs, seed " + schedule.seed() + " quantum " + schedule.quantum();
                    assertInstanceOf(StopReason.Halted.class, s, what + ": " + s);
                    long sum = 3L * K * (K + 1) / 2 + K;
                    for (int cpu = 0; cpu < n; cpu++) {
                        assertEquals(K, hits[cpu], what + ": handler runs on vCPU " + cpu);
                        assertEquals(sum, m.engine(cpu).regRead(arch == Arch.X86_64 ? X86Reg.R13 : Arm64Reg.X21), what + ": results on vCPU " + cpu);
                    }
                    assertEquals((long) n * K, o.detourHits(p), what);
                    assertEquals(0, probe.nmissed(), what);
                }
            }
        }
    }

    /**
     * vCPU 1 stands inside the displaced region (x86: after {@code push %rbp}) while vCPU 0, the
     * current one, is elsewhere: the due jump stays queued; vCPU 1 finishes on the original bytes,
     * and the jump is written once no vCPU is inside.
     */
    @Test
    void aVcpuOtherThanTheCurrentOneInsideTheRegionPostponesTheJump() {
        try (EngineGuest g = new EngineGuest(Arch.X86_64, Functions.basic(Arch.X86_64)); Kprobes k = g.kprobes()) {
            Machine m = g.machine;
            long p = g.sym("prologue"), halt = g.sym("halt_stub");
            m.setPc(halt);                                              // vCPU 0: outside, halts at once
            long sp = g.stackTop() - 0x4000;
            m.writeVirtualLong(sp - 8, halt);                           // vCPU 1 called prologue(7) and ran push %rbp
            m.writeVirtualLong(sp - 16, 0);
            assertEquals(1, g.startCpu(p + 1, sp - 16));
            m.engine(1).regWrite(X86Reg.RDI, 7);
            m.engine(1).regWrite(X86Reg.RBP, 0);
            JumpOptimizer o = JumpOptimizer.attach(k);
            int[] hits = {0};
            k.register(Kprobe.at(p).pre((pr, r) -> { hits[0]++; return 0; }));
            assertEquals(0, m.cpu());
            assertTrue(o.detour(p).region().interior(p + 1) && !o.detour(p).region().interior(m.pc()));

            assertEquals(1, o.flush());                                 // due, but vCPU 1's pc is inside: stays queued
            assertEquals(State.QUEUED, o.state(p));
            assertEquals(1, o.postponedByPc());
            assertArrayEquals(SitePatch.of(o.detour(p)).breakpoint(), m.readVirtual(p, 5));

            assertInstanceOf(StopReason.Halted.class, m.run(10_000_000));
            assertEquals(22, m.engine(1).regRead(X86Reg.RAX), "vCPU 1 finished prologue(7) on the original bytes");
            assertEquals(0, hits[0]);
            assertEquals(0, o.flush());                                 // nobody inside now
            assertEquals(State.OPTIMIZED, o.state(p));
        }
    }
}
