package dev.kpemu.optprobes;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.decoder.OutOfLine;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.DetourBuffer.Style;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * arm64 detours executed by Unicorn: copied and simulated displaced instructions, the frame at the
 * hand-off, the same final state as the unpatched function, one hand-off per call.
 */
class Arm64DetourTest {
    static final long CALLER = 0x400000L, F = 0x401000L, DATA = 0x600000L, STACK_TOP = 0x810000L;
    static final long NEAR = 0x500000L, FAR = F + 0x7f0_0000L; // 127 MiB away
    static final int CALLS = 5;

    /** Offsets of interesting instructions. */
    static final int STP = 0, ADRP = 16, LDR = 20, B_LO = 40, ADD_SHIFTED = 28;

    static byte[] func;
    static byte[] caller;
    static long end;

    static int adrp(int rd, long pc, long target) {
        long delta = (target >>> 12) - (pc >>> 12);
        return 0x90000000 | (int) (delta & 3) << 29 | (int) ((delta >> 2) & 0x7ffff) << 5 | rd;
    }

    static byte[] le(int w) {
        return new byte[] {(byte) w, (byte) (w >>> 8), (byte) (w >>> 16), (byte) (w >>> 24)};
    }

    @BeforeAll
    static void assemble() {
        ByteArrayOutputStream f = new ByteArrayOutputStream();
        f.writeBytes(Asm.arm64("stp x29, x30, [sp, #-32]!\n mov x29, sp\n str x19, [sp, #16]\n mov x19, x0", F));
        f.writeBytes(le(adrp(2, F + ADRP, DATA)));
        f.writeBytes(Asm.arm64("""
                ldr x3, [x2, #8]
                add x0, x19, x3
                add x0, x0, x1, lsl #1
                str x0, [x2, #16]
                cmp x0, #100
                b.lo skip
                sub x0, x0, #50
                skip:
                ldr x4, [x2, #32]
                add x4, x4, #1
                str x4, [x2, #32]
                mrs x5, nzcv
                ldr x19, [sp, #16]
                ldp x29, x30, [sp], #32
                ret
                """, F + LDR));
        func = f.toByteArray();
        // caller: x20 times { x0 = x1 = x20; bl F; x21 += x0 }
        ByteArrayOutputStream c = new ByteArrayOutputStream();
        c.writeBytes(Asm.arm64("mov x0, x20\n mov x1, x20", CALLER));
        c.writeBytes(le(0x94000000 | (int) (((F - (CALLER + 8)) >> 2) & 0x3ffffff)));
        c.writeBytes(Asm.arm64("add x21, x21, x0\n subs x20, x20, #1", CALLER + 12));
        c.writeBytes(le(0x54000000 | ((-5) & 0x7ffff) << 5 | 1)); // b.ne CALLER
        caller = c.toByteArray();
        end = CALLER + caller.length;
    }

    static final class Guest implements AutoCloseable {
        final Unicorn uc = Unicorn.open(Unicorn.ARCH_ARM64, Unicorn.MODE_ARM);

        Guest() {
            uc.memMap(CALLER, 0x10000, Unicorn.PROT_ALL);
            uc.memMap(DATA, 0x1000, Unicorn.PROT_ALL);
            uc.memMap(STACK_TOP - 0x10000, 0x10000, Unicorn.PROT_ALL);
            uc.memMap(NEAR, 0x1000, Unicorn.PROT_ALL);
            uc.memMap(FAR, 0x1000, Unicorn.PROT_ALL);
            uc.memWrite(CALLER, caller);
            uc.memWrite(F, func);
            uc.memWriteLong(DATA + 8, 1000);
            uc.regWrite(Arm64Reg.SP, STACK_TOP);
            for (int n = 0; n <= 28; n++) uc.regWrite(Arm64Reg.X0 + n, 0x1000 + 0x111L * n);
            uc.regWrite(Arm64Reg.X29, 0x29);
        }

        void run(int calls) {
            uc.regWrite(Arm64Reg.X20, calls);
            uc.start(CALLER, end, 0, 0);
        }

        List<Long> state() {
            List<Long> s = new ArrayList<>();
            for (int r : REGS) s.add(uc.regRead(r));
            s.add(uc.regRead(Arm64Reg.NZCV));
            s.add(uc.regRead(Arm64Reg.PC));
            for (int k = 0; k < 0x40; k += 8) s.add(uc.memReadLong(DATA + k));
            return s;
        }

        DetourBuffer optimize(long probe, long at, Style style) {
            DetourBuffer b = DetourBuffer.arm64(region(probe), at, style);
            uc.memWrite(at, b.code());
            uc.memWrite(probe, SitePatch.of(b).optimized());
            b.simulateAddress().ifPresent(sim -> uc.hookCode(sim, sim, (u, a, s) -> simulate(u, probe)));
            return b;
        }

        @Override
        public void close() {
            uc.close();
        }
    }

    /** x0–x30 and sp, in frame order. */
    static final int[] REGS = new int[32];

    static {
        for (int n = 0; n <= 28; n++) REGS[n] = Arm64Reg.X0 + n;
        REGS[29] = Arm64Reg.X29;
        REGS[30] = Arm64Reg.X30;
        REGS[31] = Arm64Reg.SP;
    }

    /** The host side of a simulated displaced instruction: the two kinds this function has. */
    static void simulate(Unicorn u, long probe) {
        // the site holds the B now: simulate from the original word, as the engine would from its saved copy
        int original = OptimizationSafety.word(func, (int) (probe - F));
        if ((original & 0x9F000000) == 0x90000000) {
            long imm = ((long) ((original >>> 5) & 0x7ffff) << 2 | ((original >>> 29) & 3));
            imm = imm << 43 >> 43; // sign-extend 21 bits
            u.regWrite(Arm64Reg.X0 + (original & 31), (probe & ~0xfffL) + (imm << 12));
        } else if ((original & 0xFF000010) == 0x54000000 && (original & 0xf) == 3) { // b.lo (cc): C == 0
            long imm = (long) ((original >>> 5) & 0x7ffff) << 45 >> 43;
            if ((u.regRead(Arm64Reg.NZCV) & (1L << 29)) == 0) u.regWrite(Arm64Reg.PC, probe + imm);
        } else {
            throw new IllegalStateException(String.format("no simulator for %08x", original));
        }
    }

    static DisplacedRegion region(long probe) {
        try (Decoder d = Decoder.open(Arch.ARM64)) {
            Verdict v = OptimizationSafety.check(d, Candidate.builder(F, func, probe).build());
            return assertInstanceOf(Verdict.Optimizable.class, v, v::toString).region();
        }
    }

    record Reference(List<List<Long>> atProbe, List<Long> end) {}

    static Reference reference(long probe, Consumer<Unicorn> atProbe) {
        try (Guest g = new Guest()) {
            List<List<Long>> seen = new ArrayList<>();
            g.uc.hookCode(probe, probe, (u, a, s) -> {
                List<Long> regs = new ArrayList<>();
                for (int r : REGS) regs.add(u.regRead(r));
                regs.add(u.regRead(Arm64Reg.NZCV));
                seen.add(regs);
                atProbe.accept(u);
            });
            g.run(CALLS);
            return new Reference(seen, g.state());
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {STP, ADRP, LDR, ADD_SHIFTED, B_LO})
    void frameDetourGivesTheSameStateAndPtRegs(int offset) {
        long probe = F + offset;
        Reference ref = reference(probe, u -> {});
        for (long at : new long[] {NEAR, FAR}) {
            try (Guest g = new Guest()) {
                DetourBuffer b = g.optimize(probe, at, Style.FRAME);
                List<List<Long>> frames = new ArrayList<>();
                g.uc.hookCode(b.handOffAddress(), b.handOffAddress(), (u, a, s) -> {
                    long sp = u.regRead(Arm64Reg.SP);
                    byte[] frame = u.memRead(sp, Arm64PtRegs.SIZE);
                    List<Long> regs = new ArrayList<>();
                    for (int n = 0; n <= 30; n++) regs.add(X86PtRegs.get(frame, Arm64PtRegs.x(n)));
                    regs.add(X86PtRegs.get(frame, Arm64PtRegs.SP));
                    regs.add(X86PtRegs.get(frame, Arm64PtRegs.PSTATE) & 0xf0000000L);
                    frames.add(regs);
                    assertEquals(probe, X86PtRegs.get(frame, Arm64PtRegs.PC));
                    assertEquals(sp + Arm64PtRegs.SIZE, X86PtRegs.get(frame, Arm64PtRegs.SP));
                });
                g.run(CALLS);
                assertEquals(ref.end(), g.state(), () -> "final state, buffer at " + Long.toHexString(at));
                assertEquals(CALLS, frames.size(), "hand-off once per call");
                assertEquals(ref.atProbe(), frames, "frame at the hand-off = registers at the probe");
                assertEquals(b.simulateAddress().isPresent(),
                        region(probe).instructions().getFirst().outOfLine() == OutOfLine.SIMULATE);
            }
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {STP, ADRP, B_LO})
    void liveRegisterDetourGivesTheSameState(int offset) {
        long probe = F + offset;
        Reference ref = reference(probe, u -> {});
        try (Guest g = new Guest()) {
            DetourBuffer b = g.optimize(probe, FAR, Style.LIVE_REGISTERS);
            List<List<Long>> live = new ArrayList<>();
            g.uc.hookCode(b.handOffAddress(), b.handOffAddress(), (u, a, s) -> {
                List<Long> regs = new ArrayList<>();
                for (int r : REGS) regs.add(u.regRead(r));
                regs.add(u.regRead(Arm64Reg.NZCV));
                live.add(regs);
            });
            g.run(CALLS);
            assertEquals(ref.end(), g.state());
            assertEquals(ref.atProbe(), live);
        }
    }

    @Test
    void bothBranchDirectionsOfASimulatedBranchAreTaken() {
        // x0 = 3 + 1000 + 2*3 >= 100 (not taken) for small inputs; DATA+8 = 0 makes it taken
        long probe = F + B_LO;
        for (long seed : new long[] {1000, 0}) {
            List<Long> expected;
            try (Guest g = new Guest()) {
                g.uc.memWriteLong(DATA + 8, seed);
                g.run(CALLS);
                expected = g.state();
            }
            try (Guest g = new Guest()) {
                g.uc.memWriteLong(DATA + 8, seed);
                g.optimize(probe, NEAR, Style.FRAME);
                g.run(CALLS);
                assertEquals(expected, g.state(), "seed " + seed);
            }
        }
    }

    @Test
    void handlerWritesToTheFrameReachTheFunction() {
        long probe = F + LDR; // x19 holds the argument here
        Reference ref = reference(probe, u -> u.regWrite(Arm64Reg.X19, u.regRead(Arm64Reg.X19) + 100));
        try (Guest g = new Guest()) {
            DetourBuffer b = g.optimize(probe, NEAR, Style.FRAME);
            g.uc.hookCode(b.handOffAddress(), b.handOffAddress(), (u, a, s) -> {
                long slot = u.regRead(Arm64Reg.SP) + Arm64PtRegs.x(19);
                u.memWriteLong(slot, u.memReadLong(slot) + 100);
            });
            g.run(CALLS);
            assertEquals(ref.end(), g.state());
        }
    }

    @Test
    void breakpointHitDuringOptimizationRunsTheDisplacedCodeWithoutTheHandOff() {
        long probe = F + STP;
        Reference ref = reference(probe, u -> {});
        try (Guest g = new Guest()) {
            DetourBuffer b = DetourBuffer.arm64(region(probe), NEAR);
            g.uc.memWrite(NEAR, b.code());
            SitePatch p = SitePatch.of(b);
            g.uc.memWrite(probe, p.breakpoint());
            int[] handOffs = {0}, traps = {0};
            g.uc.hookCode(b.handOffAddress(), b.handOffAddress(), (u, a, s) -> handOffs[0]++);
            g.uc.hookInterrupt((u, intno) -> {
                assertEquals(probe, u.regRead(Arm64Reg.PC)); // BRK: pc at the BRK
                traps[0]++;
                u.regWrite(Arm64Reg.PC, b.displacedCodeAddress());
            });
            g.run(CALLS);
            assertEquals(ref.end(), g.state());
            assertEquals(CALLS, traps[0]);
            assertEquals(0, handOffs[0]);
            g.uc.memWrite(probe, p.original());
            assertArrayEquals(func, g.uc.memRead(F, func.length));
        }
    }

    @Test
    void sitePatchAndRange() {
        long probe = F + STP;
        DetourBuffer b = DetourBuffer.arm64(region(probe), FAR);
        SitePatch p = SitePatch.of(b);
        // B: imm26 = (FAR - probe) / 4
        int expected = 0x14000000 | (int) (((FAR - probe) >> 2) & 0x3ffffff);
        assertArrayEquals(le(expected), p.optimized());
        assertArrayEquals(le(0xD4200080), p.breakpoint());
        assertArrayEquals(java.util.Arrays.copyOf(func, 4), p.original());
        OptimizationRefusedException e = assertThrows(OptimizationRefusedException.class,
                () -> DetourBuffer.arm64(region(probe), F + (128L << 20)));
        assertEquals(Refusal.Reason.OUT_OF_RANGE, e.refusal().reason());
        DetourBuffer.arm64(region(probe), F - (128L << 20) + 0x1000); // backwards, in range
        assertThrows(OptimizationRefusedException.class, () -> SitePatch.arm64Branch(F, F + 2));
    }
}
