package dev.kpemu.optprobes;

import dev.kpemu.decoder.Instruction;
import dev.kpemu.decoder.OutOfLine;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.DetourBuffer.Style;
import dev.kpemu.optprobes.Refusal.Reason;
import java.io.ByteArrayOutputStream;
import java.util.OptionalLong;

/**
 * arm64 detour code generation. The frame is 272 bytes below {@code sp} (kept 16-byte aligned);
 * {@code pstate} in the frame is {@code NZCV | DAIF}; only NZCV is restored ({@code msr nzcv}).
 * The displaced instruction is copied when the decoder says {@link OutOfLine#COPY} (and for
 * {@code nop}, which is simulated only to save a trap); any other {@link OutOfLine#SIMULATE}
 * instruction (PC-relative: b, bl, b.cond, cbz, tbz, adr, adrp, ldr literal; br, blr, ret) gets a
 * second hand-off where the host computes its effect.
 */
final class Arm64Detour {
    private Arm64Detour() {}

    static final int MAX_SIZE = 4 * 64;
    /** {@code B} reaches ±128 MiB. */
    static final long B_RANGE = 128L << 20;
    static final int NOP = 0xD503201F;
    /** {@code BRK #KPROBES_BRK_IMM}. */
    static final int BRK_KPROBES = 0xD4200080;

    static DetourBuffer build(DisplacedRegion region, long address, Style style) {
        if (region.arch() != Arch.ARM64 || region.instructions().size() != 1) {
            throw new IllegalArgumentException("not a one-instruction arm64 region");
        }
        Instruction insn = region.instructions().getFirst();
        Words w = new Words(address);
        long handOff;
        int size = Arm64PtRegs.SIZE;
        if (style == Style.FRAME) {
            w.put(0xD1000000 | size << 10 | 31 << 5 | 31);                 // sub sp, sp, #272
            for (int r = 0; r < 30; r += 2) w.put(pair(0xA9000000, r, r + 1, Arm64PtRegs.x(r)));
            w.put(single(0xF9000000, 30, Arm64PtRegs.x(30)));              // str x30, [sp, #240]
            w.put(0x91000000 | size << 10 | 31 << 5);                      // add x0, sp, #272
            w.put(single(0xF9000000, 0, Arm64PtRegs.SP));
            long pc = region.probeAddress();
            w.put(0xD2800000 | (int) (pc & 0xffff) << 5);                  // movz x0, #pc[15:0]
            for (int hw = 1; hw < 4; hw++) {
                w.put(0xF2800000 | hw << 21 | (int) ((pc >>> (16 * hw)) & 0xffff) << 5); // movk x0, #.., lsl 16*hw
            }
            w.put(single(0xF9000000, 0, Arm64PtRegs.PC));
            w.put(0xD53B4200);                                              // mrs x0, nzcv
            w.put(0xD53B4221);                                              // mrs x1, daif
            w.put(0xAA010000);                                              // orr x0, x0, x1
            w.put(single(0xF9000000, 0, Arm64PtRegs.PSTATE));
            w.put(pair(0xA9400000, 0, 1, 0));                              // ldp x0, x1, [sp]
            handOff = w.here();
            w.put(NOP);
            w.put(single(0xF9400000, 0, Arm64PtRegs.PSTATE));
            w.put(0xD51B4200);                                              // msr nzcv, x0
            for (int r = 0; r < 30; r += 2) w.put(pair(0xA9400000, r, r + 1, Arm64PtRegs.x(r)));
            w.put(single(0xF9400000, 30, Arm64PtRegs.x(30)));
            w.put(0x91000000 | size << 10 | 31 << 5 | 31);                 // add sp, sp, #272
        } else {
            handOff = w.here();
            w.put(NOP);
        }
        long displaced = w.here();
        OptionalLong simulate = OptionalLong.empty();
        int word = OptimizationSafety.word(insn.bytes(), 0);
        if (insn.outOfLine() == OutOfLine.COPY || word == NOP) {
            w.put(word);
        } else if (insn.outOfLine() == OutOfLine.SIMULATE) {
            simulate = OptionalLong.of(w.here());
            w.put(NOP);
        } else {
            throw new OptimizationRefusedException(new Refusal(Reason.NOT_RELOCATABLE, insn.address(),
                    "cannot run from a detour: " + insn.text()));
        }
        w.put(branch(w.here(), region.end()));
        return new DetourBuffer(Arch.ARM64, address, w.out.toByteArray(), style, region, handOff, displaced, simulate,
                region.end());
    }

    /** {@code B} from {@code from} to {@code to}, or {@link Reason#OUT_OF_RANGE}. */
    static int branch(long from, long to) {
        long off = to - from;
        if ((off & 3) != 0 || off < -B_RANGE || off >= B_RANGE) {
            throw new OptimizationRefusedException(new Refusal(Reason.OUT_OF_RANGE, to,
                    String.format("B from %#x to %#x is out of range (±128 MiB)", from, to)));
        }
        return 0x14000000 | (int) ((off >> 2) & 0x3ffffff);
    }

    /** STP/LDP (signed offset, 64-bit) of {@code rt, rt2} at {@code [sp, #off]}. */
    private static int pair(int base, int rt, int rt2, int off) {
        return base | ((off / 8) & 0x7f) << 15 | rt2 << 10 | 31 << 5 | rt;
    }

    /** STR/LDR (unsigned offset, 64-bit) of {@code rt} at {@code [sp, #off]}. */
    private static int single(int base, int rt, int off) {
        return base | (off / 8) << 10 | 31 << 5 | rt;
    }

    static byte[] le(int word) {
        return new byte[] {(byte) word, (byte) (word >>> 8), (byte) (word >>> 16), (byte) (word >>> 24)};
    }

    private static final class Words {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final long origin;

        Words(long origin) {
            this.origin = origin;
        }

        long here() {
            return origin + out.size();
        }

        void put(int word) {
            out.writeBytes(le(word));
        }
    }
}
