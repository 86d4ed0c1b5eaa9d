package dev.kpemu.optprobes;

import dev.kpemu.decoder.Instruction;
import dev.kpemu.decoder.OutOfLine;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.DetourBuffer.Style;
import dev.kpemu.optprobes.Refusal.Reason;
import java.io.ByteArrayOutputStream;
import java.util.OptionalLong;

/**
 * x86-64 detour code generation. The save sequence changes no flags before {@code pushfq} has
 * captured them and uses {@code lea}/{@code mov} only, so every general register and RFLAGS are
 * still live (and equal to the frame) at the hand-off; only {@code rsp} is lowered by the frame.
 * The kernel is built with {@code -mno-red-zone}, so the stack below {@code rsp} is free to use, as
 * Linux's own template does.
 */
final class X86Detour {
    private X86Detour() {}

    /** Upper bound of a buffer: frame code + {@code MAX_OPTIMIZED_LENGTH} (20) + jmp. */
    static final int MAX_SIZE = 512;

    static DetourBuffer build(DisplacedRegion region, long address, Style style) {
        if (region.arch() != Arch.X86_64) throw new IllegalArgumentException("not an x86-64 region");
        Asm a = new Asm(address);
        long handOff;
        if (style == Style.FRAME) {
            int size = X86PtRegs.SIZE;
            a.leaRsp(-size);
            for (int[] r : X86PtRegs.GPRS) a.store(r[0], r[1]);
            a.bytes(0x9c, 0x58);                     // pushfq; pop rax
            a.store(0, X86PtRegs.FLAGS);
            a.bytes(0x48, 0x8d, 0x84, 0x24).int32(size); // lea size(%rsp), %rax
            a.store(0, X86PtRegs.SP);
            a.bytes(0x48, 0xb8).int64(region.probeAddress() + OptimizationSafety.INT3_INSN_SIZE); // movabs ip, %rax
            a.store(0, X86PtRegs.IP);
            a.storeImm(X86PtRegs.CS, (int) X86PtRegs.KERNEL_CS);
            a.storeImm(X86PtRegs.SS, (int) X86PtRegs.KERNEL_DS);
            a.storeImm(X86PtRegs.ORIG_AX, -1);
            a.load(0, X86PtRegs.RAX);
            handOff = a.here();
            a.bytes(0x90);
            for (int[] r : X86PtRegs.GPRS) if (r[0] != 0) a.load(r[0], r[1]);
            a.load(0, X86PtRegs.FLAGS);
            a.bytes(0x50, 0x9d);                     // push rax; popfq
            a.load(0, X86PtRegs.RAX);
            a.leaRsp(size);
        } else {
            handOff = a.here();
            a.bytes(0x90);
        }
        long displaced = a.here();
        for (Instruction i : region.instructions()) {
            a.raw(relocate(i, a.here()));
        }
        a.raw(jmp(a.here(), region.end()));
        return new DetourBuffer(Arch.X86_64, address, a.out.toByteArray(), style, region, handOff, displaced,
                OptionalLong.empty(), region.end());
    }

    /**
     * The bytes of {@code i} to run at {@code at}: RIP-relative displacements rewritten
     * ({@code __copy_instruction}); the boostable instructions the decoder would simulate in a
     * breakpoint probe ({@code ret}, {@code pushf}, {@code popf}, {@code cli}, {@code sti},
     * {@code jmp *%reg}) are position independent and copied as they are, as Linux does.
     */
    static byte[] relocate(Instruction i, long at) {
        if (i.outOfLine() == OutOfLine.COPY_WITH_FIXUP) {
            try {
                return i.relocatedTo(at);
            } catch (IllegalArgumentException e) {
                throw new OptimizationRefusedException(new Refusal(Reason.OUT_OF_RANGE, i.address(), e.getMessage()));
            }
        }
        if (i.outOfLine() == OutOfLine.COPY || i.boostable() && i.pcRelative().isEmpty()) return i.bytes();
        throw new OptimizationRefusedException(new Refusal(Reason.NOT_RELOCATABLE, i.address(),
                "cannot run from a detour: " + i.text()));
    }

    /** {@code to - next} as a rel32, or {@link Reason#OUT_OF_RANGE}. */
    static int rel32(long next, long to, String what) {
        long rel = to - next;
        if (rel != (int) rel) {
            throw new OptimizationRefusedException(new Refusal(Reason.OUT_OF_RANGE, to,
                    String.format("%s from %#x to %#x does not fit in rel32", what, next, to)));
        }
        return (int) rel;
    }

    /** The 5-byte {@code jmp rel32} at {@code from} to {@code to} ({@code JMP32_INSN_OPCODE}). */
    static byte[] jmp(long from, long to) {
        int rel = rel32(from + OptimizationSafety.JMP32_INSN_SIZE, to, "jump");
        return new byte[] {(byte) 0xe9, (byte) rel, (byte) (rel >>> 8), (byte) (rel >>> 16), (byte) (rel >>> 24)};
    }

    /** A tiny x86-64 encoder for the few forms the detour uses. */
    private static final class Asm {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final long origin;

        Asm(long origin) {
            this.origin = origin;
        }

        long here() {
            return origin + out.size();
        }

        Asm bytes(int... bs) {
            for (int b : bs) out.write(b);
            return this;
        }

        void raw(byte[] b) {
            out.writeBytes(b);
        }

        Asm int32(int v) {
            return bytes(v, v >>> 8, v >>> 16, v >>> 24);
        }

        Asm int64(long v) {
            int32((int) v);
            return int32((int) (v >>> 32));
        }

        /** {@code lea disp(%rsp), %rsp}. */
        void leaRsp(int disp) {
            bytes(0x48, 0x8d, 0xa4, 0x24).int32(disp);
        }

        /** {@code mov %reg, disp(%rsp)}. */
        void store(int reg, int disp) {
            rspForm(0x89, reg, disp);
        }

        /** {@code mov disp(%rsp), %reg}. */
        void load(int reg, int disp) {
            rspForm(0x8b, reg, disp);
        }

        /** {@code movq $imm32, disp(%rsp)} (sign-extended). */
        void storeImm(int disp, int imm) {
            rspForm(0xc7, 0, disp);
            int32(imm);
        }

        private void rspForm(int opcode, int reg, int disp) {
            bytes(0x48 | (reg >= 8 ? 4 : 0), opcode);
            if (disp >= -128 && disp <= 127) {
                bytes(0x44 | (reg & 7) << 3, 0x24, disp);
            } else {
                bytes(0x84 | (reg & 7) << 3, 0x24).int32(disp);
            }
        }
    }
}
