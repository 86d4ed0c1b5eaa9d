package dev.kpemu.optprobes;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.decoder.Instruction;
import dev.kpemu.decoder.OutOfLine;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.DetourBuffer.Style;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

/**
 * x86-64 detours executed by Unicorn on a bare-metal guest: a function probed through a detour
 * ends in the same registers and memory as the unpatched function, its handler hand-off runs once
 * per call and sees the pt_regs the function had at the probe, RIP-relative displaced instructions
 * work from a buffer 1.75 GiB away.
 */
class X86DetourTest {
    static final long CALLER = 0x400000L, F = 0x401000L, DATA = 0x600000L, STACK_TOP = 0x810000L;
    static final long NEAR = 0x500000L, FAR = F + 0x7000_0000L;
    static final int CALLS = 5;

    static final String FUNC = """
            .intel_syntax noprefix
            fstart:
            .set data, fstart + 0x1ff000
            .set out, data + 0x10
            .set counter, data + 0x20
            push rbp
            mov rbp, rsp
            push r12
            push rbx
            mov rbx, rdi
            mov rax, qword ptr [rip + data]
            add rax, rbx
            lea r12, [rax + rsi*2]
            mov qword ptr [rip + out], r12
            imul rax, r12
            add qword ptr [rip + counter], 1
            cmp rax, 5000
            pushfq
            pop rcx
            pop rbx
            pop r12
            pop rbp
            ret
            """;
    /** Calls the function r13 times with rdi = rsi = r13, then stops at END. */
    static final String CALLER_SRC = """
            .intel_syntax noprefix
            .set func, 0x401000
            1: mov rdi, r13
            mov rsi, r13
            call func
            add r14, rax
            dec r13
            jnz 1b
            """;

    static byte[] func;
    static byte[] caller;
    static List<Instruction> insns;

    @BeforeAll
    static void assemble() {
        func = Asm.x86(FUNC, F);
        caller = Asm.x86(CALLER_SRC, CALLER);
        try (Decoder d = Decoder.open(Arch.X86_64)) {
            insns = d.decodeAll(func, F).instructions();
        }
    }

    @AfterAll
    static void none() {}

    /** A bare-metal x86-64 guest running the function. */
    static final class Guest implements AutoCloseable {
        final Unicorn uc = Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64);
        final long end = CALLER + caller.length;

        Guest() {
            uc.memMap(CALLER, 0x10000, Unicorn.PROT_ALL);
            uc.memMap(DATA, 0x1000, Unicorn.PROT_ALL);
            uc.memMap(STACK_TOP - 0x10000, 0x10000, Unicorn.PROT_ALL);
            uc.memMap(NEAR, 0x1000, Unicorn.PROT_ALL);
            uc.memMap(FAR, 0x1000, Unicorn.PROT_ALL);
            uc.memWrite(CALLER, caller);
            uc.memWrite(F, func);
            uc.memWriteLong(DATA, 1000);
            uc.regWrite(X86Reg.RSP, STACK_TOP);
            long v = 0x1111;
            for (int r : new int[] {X86Reg.RAX, X86Reg.RBX, X86Reg.RCX, X86Reg.RDX, X86Reg.RBP, X86Reg.R8,
                    X86Reg.R8 + 1, X86Reg.R8 + 2, X86Reg.R8 + 3, X86Reg.R8 + 4, X86Reg.R15}) {
                uc.regWrite(r, v += 0x1010101);
            }
        }

        /** Runs {@code calls} calls of the function. */
        void run(int calls) {
            uc.regWrite(X86Reg.R13, calls);
            uc.start(CALLER, end, 0, 0);
        }

        /** Registers and the data page. */
        List<Long> state() {
            List<Long> s = new ArrayList<>();
            for (int r : REGS) s.add(uc.regRead(r));
            for (int k = 0; k < 0x40; k += 8) s.add(uc.memReadLong(DATA + k));
            return s;
        }

        /** Installs a detour for the probe at {@code probe} and writes the jump; returns the buffer. */
        DetourBuffer optimize(long probe, long at, Style style) {
            DetourBuffer b = DetourBuffer.x86(region(probe), at, style);
            uc.memWrite(at, b.code());
            uc.memWrite(probe, SitePatch.of(b).optimized());
            return b;
        }

        @Override
        public void close() {
            uc.close();
        }
    }

    static final int[] REGS = {X86Reg.RAX, X86Reg.RBX, X86Reg.RCX, X86Reg.RDX, X86Reg.RSI, X86Reg.RDI, X86Reg.RBP,
        X86Reg.RSP, X86Reg.R8, X86Reg.R8 + 1, X86Reg.R8 + 2, X86Reg.R8 + 3, X86Reg.R8 + 4, X86Reg.R8 + 5,
        X86Reg.R8 + 6, X86Reg.R15, X86Reg.RFLAGS, X86Reg.RIP};
    /** pt_regs slots in {@link #REGS} order (rip excluded; sp and flags included). */
    static final int[] SLOTS = {X86PtRegs.RAX, X86PtRegs.RBX, X86PtRegs.RCX, X86PtRegs.RDX, X86PtRegs.RSI,
        X86PtRegs.RDI, X86PtRegs.RBP, X86PtRegs.SP, X86PtRegs.R8, X86PtRegs.R9, X86PtRegs.R10, X86PtRegs.R11,
        X86PtRegs.R12, X86PtRegs.R13, X86PtRegs.R14, X86PtRegs.R15, X86PtRegs.FLAGS};

    static DisplacedRegion region(long probe) {
        try (Decoder d = Decoder.open(Arch.X86_64)) {
            Verdict v = OptimizationSafety.check(d, Candidate.builder(F, func, probe).build());
            return assertInstanceOf(Verdict.Optimizable.class, v, v::toString).region();
        }
    }

    /** Registers at each hit of {@code probe} in the unpatched function, and the final state. */
    record Reference(List<List<Long>> atProbe, List<Long> end) {}

    static Reference reference(long probe, Consumer<Unicorn> atProbe) {
        try (Guest g = new Guest()) {
            List<List<Long>> seen = new ArrayList<>();
            g.uc.hookCode(probe, probe, (u, a, s) -> {
                List<Long> regs = new ArrayList<>();
                for (int k = 0; k < SLOTS.length; k++) regs.add(u.regRead(REGS[k]));
                seen.add(regs);
                atProbe.accept(u);
            });
            g.run(CALLS);
            return new Reference(seen, g.state());
        }
    }

    static long probeAt(int index) {
        return insns.get(index).address();
    }

    /** push rbp (prologue), mov rax,[rip+data] (RIP-relative load), lea + RIP store, add [rip+x],imm8. */
    static final int[] PROBES = {0, 5, 7, 10};

    @ParameterizedTest
    @ValueSource(ints = {0, 5, 7, 10})
    void frameDetourGivesTheSameStateAndPtRegs(int index) {
        long probe = probeAt(index);
        Reference ref = reference(probe, u -> {});
        for (long at : new long[] {NEAR, FAR}) {
            try (Guest g = new Guest()) {
                DetourBuffer b = g.optimize(probe, at, Style.FRAME);
                List<List<Long>> frames = new ArrayList<>();
                List<Long> ips = new ArrayList<>();
                g.uc.hookCode(b.handOffAddress(), b.handOffAddress(), (u, a, s) -> {
                    long sp = u.regRead(X86Reg.RSP);
                    byte[] frame = u.memRead(sp, X86PtRegs.SIZE);
                    List<Long> regs = new ArrayList<>();
                    for (int slot : SLOTS) regs.add(X86PtRegs.get(frame, slot));
                    frames.add(regs);
                    ips.add(X86PtRegs.get(frame, X86PtRegs.IP));
                    assertEquals(sp + X86PtRegs.SIZE, X86PtRegs.get(frame, X86PtRegs.SP));
                    assertEquals(X86PtRegs.KERNEL_CS, X86PtRegs.get(frame, X86PtRegs.CS));
                    assertEquals(-1L, X86PtRegs.get(frame, X86PtRegs.ORIG_AX));
                });
                g.run(CALLS);
                assertEquals(ref.end(), g.state(), () -> "final state, buffer at " + Long.toHexString(at));
                assertEquals(CALLS, frames.size(), "hand-off once per call");
                assertEquals(ref.atProbe(), frames, "pt_regs at the hand-off = registers at the probe");
                assertTrue(ips.stream().allMatch(ip -> ip == probe + 1), "ip = probe + 1, as Linux");
            }
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {0, 5, 7, 10})
    void liveRegisterDetourGivesTheSameState(int index) {
        long probe = probeAt(index);
        Reference ref = reference(probe, u -> {});
        try (Guest g = new Guest()) {
            DetourBuffer b = g.optimize(probe, FAR, Style.LIVE_REGISTERS);
            List<List<Long>> live = new ArrayList<>();
            g.uc.hookCode(b.handOffAddress(), b.handOffAddress(), (u, a, s) -> {
                List<Long> regs = new ArrayList<>();
                for (int k = 0; k < SLOTS.length; k++) regs.add(u.regRead(REGS[k]));
                live.add(regs);
            });
            g.run(CALLS);
            assertEquals(ref.end(), g.state());
            assertEquals(ref.atProbe(), live);
        }
    }

    @Test
    void handlerWritesToTheFrameReachTheFunction() {
        long probe = probeAt(5); // rbx holds the argument here
        Reference ref = reference(probe, u -> u.regWrite(X86Reg.RBX, u.regRead(X86Reg.RBX) + 100));
        try (Guest g = new Guest()) {
            DetourBuffer b = g.optimize(probe, NEAR, Style.FRAME);
            g.uc.hookCode(b.handOffAddress(), b.handOffAddress(), (u, a, s) -> {
                long sp = u.regRead(X86Reg.RSP);
                u.memWriteLong(sp + X86PtRegs.RBX, u.memReadLong(sp + X86PtRegs.RBX) + 100);
            });
            g.run(CALLS);
            assertEquals(ref.end(), g.state());
        }
    }

    @Test
    void breakpointHitDuringOptimizationRunsTheDisplacedCodeWithoutTheHandOff() {
        long probe = probeAt(7);
        Reference ref = reference(probe, u -> {});
        try (Guest g = new Guest()) {
            DetourBuffer b = DetourBuffer.x86(region(probe), FAR);
            g.uc.memWrite(FAR, b.code());
            SitePatch p = SitePatch.of(b);
            g.uc.memWrite(probe, p.breakpoint());
            int[] handOffs = {0}, traps = {0};
            g.uc.hookCode(b.handOffAddress(), b.handOffAddress(), (u, a, s) -> handOffs[0]++);
            g.uc.hookInterrupt((u, intno) -> {
                assertEquals(3, intno);
                assertEquals(probe + 1, u.regRead(X86Reg.RIP));
                traps[0]++;
                u.regWrite(X86Reg.RIP, b.displacedCodeAddress());
            });
            g.run(CALLS);
            assertEquals(ref.end(), g.state());
            assertEquals(CALLS, traps[0]);
            assertEquals(0, handOffs[0]);
        }
    }

    @Test
    void sitePatchBytesAndByteForByteRestore() {
        long probe = probeAt(0);
        try (Guest g = new Guest()) {
            DetourBuffer b = g.optimize(probe, NEAR, Style.FRAME);
            SitePatch p = SitePatch.of(b);
            assertEquals(5, p.length());
            int rel = (int) (NEAR - (probe + 5));
            assertArrayEquals(new byte[] {(byte) 0xe9, (byte) rel, (byte) (rel >> 8), (byte) (rel >> 16), (byte) (rel >> 24)},
                    p.optimized());
            assertArrayEquals(java.util.Arrays.copyOf(func, 5), p.original());
            byte[] bp = p.original();
            bp[0] = (byte) 0xcc;
            assertArrayEquals(bp, p.breakpoint());
            g.uc.memWrite(probe, p.breakpoint());
            g.uc.memWrite(probe, p.original());
            assertArrayEquals(func, g.uc.memRead(F, func.length));
        }
    }

    @Test
    void rangeChecks() {
        long probe = probeAt(5);
        DisplacedRegion r = region(probe);
        // jump back beyond ±2 GiB
        OptimizationRefusedException e = assertThrows(OptimizationRefusedException.class,
                () -> DetourBuffer.x86(r, F + 0x8000_0000L));
        assertEquals(Refusal.Reason.OUT_OF_RANGE, e.refusal().reason());
        assertThrows(OptimizationRefusedException.class, () -> SitePatch.x86Jump(F, F - 0x8000_0010L));
        // jump in range but the RIP-relative target out of range from the buffer
        try (Decoder d = Decoder.open(Arch.X86_64)) {
            long high = 0x9000_0000L;
            // mov rax, [rip + 0x7ffffff0]; nop: target = high + 7 + 0x7ffffff0
            byte[] code = {0x48, (byte) 0x8b, 0x05, (byte) 0xf0, (byte) 0xff, (byte) 0xff, 0x7f, (byte) 0x90, (byte) 0xc3};
            DisplacedRegion hr = assertInstanceOf(Verdict.Optimizable.class,
                    OptimizationSafety.check(d, Candidate.builder(high, code, high).build())).region();
            assertEquals(OutOfLine.COPY_WITH_FIXUP, hr.instructions().getFirst().outOfLine());
            OptimizationRefusedException rip = assertThrows(OptimizationRefusedException.class,
                    () -> DetourBuffer.x86(hr, high - 0x1000_0000L));
            assertEquals(Refusal.Reason.OUT_OF_RANGE, rip.refusal().reason());
            DetourBuffer.x86(hr, high + 0x1000_0000L); // closer to the target: fits
        }
    }
}
