package dev.kpemu.optprobes;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kpemu.kprobes.Kprobe;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.StopReason;
import dev.kpemu.unicorn.X86Reg;
import dev.kpemu.optprobes.JumpOptimizer.State;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A guest thread stopped inside the displaced region when optimization is requested: the jump is
 * not written while its pc is in the region's interior, the thread finishes correctly, and the
 * jump is written at the next safe point where the pc is elsewhere. A control shows the hazard is
 * real: writing the jump under the stopped thread breaks it. A thread stopped at the probe address
 * itself is not in the interior: the jump is written and the thread enters the detour.
 */
class ThreadInsideRegionTest {

    /**
     * Runs {@code prologue(v)} until the vCPU stands at {@code stopAt} (before executing it). Host
     * breakpoints stop at block starts (the function entry); one instruction further (x86: past
     * {@code push %rbp}) the thread is put by doing what that instruction does.
     */
    static void stopAt(EngineGuest g, long stopAt, long v) {
        long entry = g.sym("prologue");
        g.prepareCall("prologue", v);
        g.machine.addBreakpoint(entry);
        StopReason r = g.machine.run(1_000_000);
        assertInstanceOf(StopReason.Breakpoint.class, r);
        assertEquals(entry, g.machine.pc());
        g.machine.removeBreakpoint(entry);
        if (stopAt == entry + 1) {
            assertEquals(Arch.X86_64, g.arch, "only x86's one-byte push %rbp is stepped by hand");
            var uc = g.machine.engine();
            long rsp = uc.regRead(X86Reg.RSP) - 8;
            g.machine.writeVirtualLong(rsp, uc.regRead(X86Reg.RBP));
            uc.regWrite(X86Reg.RSP, rsp);
            g.machine.setPc(stopAt);
        } else {
            assertEquals(entry, stopAt);
        }
        g.machine.invalidateCode(entry, g.sizes.get("prologue"));
    }

    @Test
    void x86ThreadInsideTheRegionPostponesTheJump() {
        try (EngineGuest g = new EngineGuest(Arch.X86_64, Functions.basic(Arch.X86_64)); Kprobes k = g.kprobes()) {
            JumpOptimizer o = JumpOptimizer.attach(k);
            long p = g.sym("prologue");
            stopAt(g, p + 1, 7);                              // after push %rbp, before mov %rsp,%rbp
            int[] hits = {0};
            k.register(Kprobe.at(p).pre((pr, r) -> { hits[0]++; return 0; }));
            assertTrue(o.detour(p).region().interior(p + 1));
            assertEquals(1, o.flush());                       // due, but the pc is inside: stays queued
            assertEquals(State.QUEUED, o.state(p));
            assertEquals(1, o.postponedByPc());
            assertArrayEquals(SitePatch.of(o.detour(p)).breakpoint(), g.machine.readVirtual(p, 5));
            assertEquals(22, g.finish());                     // the thread resumes on the original bytes
            assertEquals(0, hits[0]);
            assertEquals(0, o.flush());                       // pc in the halt stub now
            assertEquals(State.OPTIMIZED, o.state(p));
            assertEquals(25, g.call("prologue", 8));
            assertEquals(1, hits[0]);
        }
    }

    @Test
    void x86WritingTheJumpUnderAStoppedThreadBreaksIt() {
        try (EngineGuest g = new EngineGuest(Arch.X86_64, Functions.basic(Arch.X86_64)); Kprobes k = g.kprobes()) {
            JumpOptimizer o = JumpOptimizer.attach(k);
            long p = g.sym("prologue");
            stopAt(g, p + 1, 7);
            k.register(Kprobe.at(p).pre((pr, r) -> 0));
            // what a careless optimizer would do: write the jump now
            g.machine.writeVirtual(p, SitePatch.of(o.detour(p)).optimized());
            g.machine.invalidateCode(p, 5);
            StopReason r;
            try {
                r = g.machine.run(1_000_000);
            } catch (RuntimeException e) {
                r = null;
            }
            boolean correct = r instanceof StopReason.Halted && g.returnValue() == 22;
            assertFalse(correct, "resuming inside the jump's bytes went on correctly: " + r);
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void threadAtTheProbeAddressEntersTheDetour(Arch arch) {
        try (EngineGuest g = new EngineGuest(arch, Functions.basic(arch)); Kprobes k = g.kprobes()) {
            JumpOptimizer o = JumpOptimizer.attach(k);
            long p = g.sym("prologue");
            stopAt(g, p, 7);
            int[] hits = {0};
            k.register(Kprobe.at(p).pre((pr, r) -> { hits[0]++; return 0; }));
            assertEquals(0, o.flush());
            assertEquals(State.OPTIMIZED, o.state(p));
            assertEquals(22, g.finish());
            assertEquals(1, hits[0]);
        }
    }
}
