package dev.kpemu.decoder;

import dev.kpemu.decoder.CsInstruction.X86Detail;
import dev.kpemu.decoder.CsInstruction.X86Operand;
import dev.kpemu.machine.Arch;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * x86-64 decoder: Capstone for lengths, text and operands; the opcode bytes for control flow and
 * kprobes decisions (see {@link X86ProbeRules}). RIP-relative displacement fields are located with
 * {@code cs_x86.encoding} ({@code disp_offset}/{@code disp_size}), never with operand sizes.
 */
public final class X86Decoder extends CapstoneDecoder {

    /** Opens a decoder with its own Capstone handle (confined to the calling thread). */
    public X86Decoder() {
        super(Arch.X86_64);
    }

    /**
     * {@code UD1} ({@code 0f b9}) has a ModRM operand (Intel SDM; Linux's opcode map, Grp10), which
     * Capstone 5.0 does not read: Linux's UBSAN traps from 6.12 on ({@code 67 48 0f b9 3a}) would
     * decode one byte short and put everything after them off the instruction boundaries.
     */
    @Override
    CsInstruction corrected(CsInstruction insn, byte[] code, int offset) {
        byte[] b = insn.bytes();
        X86Opcode op = X86Opcode.parse(b);
        if (op.vex() || !op.isTwoByte(0xb9)) return insn;
        int opcodeEnd = 0;
        while (opcodeEnd < b.length && !(u8(b, opcodeEnd) == 0x0f && opcodeEnd + 1 < b.length && u8(b, opcodeEnd + 1) == 0xb9)) opcodeEnd++;
        int at = offset + opcodeEnd + 2;
        if (at >= code.length) return null;
        int modrm = u8(code, at), mod = modrm >> 6, rm = modrm & 7, len = opcodeEnd + 3;
        if (mod != 3 && rm == 4) {
            if (at + 1 >= code.length) return null;
            int sibBase = u8(code, at + 1) & 7;
            len += 1;
            if (mod == 0 && sibBase == 5) len += 4;
        }
        if (mod == 0 && rm == 5) len += 4;
        else if (mod == 1) len += 1;
        else if (mod == 2) len += 4;
        if (offset + len > code.length) return null;
        if (len == b.length) return insn;
        return new CsInstruction(insn.id(), insn.address(), java.util.Arrays.copyOfRange(code, offset, offset + len), "ud1", "",
                insn.groups(), insn.detail());
    }

    /**
     * Instructions of Linux's x86 opcode map that Capstone 5.0 does not decode, found in Debian's
     * kernels by comparing its instruction starts with GNU objdump's over their text: each is a
     * fixed encoding without memory operands, so its bytes are all there is to it.
     */
    private static final Map<String, byte[]> FIXED_BEYOND_CAPSTONE = new LinkedHashMap<>();
    static {
        FIXED_BEYOND_CAPSTONE.put("serialize", HexFormat.of().parseHex("0f01e8"));   // (sync_core)
        FIXED_BEYOND_CAPSTONE.put("wrmsrns", HexFormat.of().parseHex("0f01c6"));
        FIXED_BEYOND_CAPSTONE.put("tdcall", HexFormat.of().parseHex("660f01cc"));   // (TDX guest)
        FIXED_BEYOND_CAPSTONE.put("seamcall", HexFormat.of().parseHex("660f01cf"));
        FIXED_BEYOND_CAPSTONE.put("seamret", HexFormat.of().parseHex("660f01cd"));
        FIXED_BEYOND_CAPSTONE.put("seamops", HexFormat.of().parseHex("660f01ce"));
        FIXED_BEYOND_CAPSTONE.put("rmpupdate", HexFormat.of().parseHex("f20f01fe"));   // (SEV-SNP host)
        FIXED_BEYOND_CAPSTONE.put("pvalidate", HexFormat.of().parseHex("f20f01ff"));   // (SEV-SNP guest)
        FIXED_BEYOND_CAPSTONE.put("rmpadjust", HexFormat.of().parseHex("f30f01fe"));
        FIXED_BEYOND_CAPSTONE.put("psmash", HexFormat.of().parseHex("f30f01ff"));
        FIXED_BEYOND_CAPSTONE.put("tilerelease", HexFormat.of().parseHex("c4e27849c0"));   // (AMX)
    }

    @Override
    CsInstruction beyondCapstone(byte[] code, int offset, long address) {
        for (Map.Entry<String, byte[]> e : FIXED_BEYOND_CAPSTONE.entrySet()) {
            byte[] f = e.getValue();
            if (offset + f.length <= code.length && Arrays.equals(code, offset, offset + f.length, f, 0, f.length))
                return synthesized(address, e.getKey(), f);
        }
        // lkgs r16 (FRED): f2 0f 00 /6, register form only (a memory operand would need its displacement located)
        if (offset + 4 <= code.length && u8(code, offset) == 0xf2 && u8(code, offset + 1) == 0x0f && u8(code, offset + 2) == 0x00
                && (u8(code, offset + 3) & 0xf8) == 0xf0)
            return synthesized(address, "lkgs", Arrays.copyOfRange(code, offset, offset + 4));
        return null;
    }

    private static CsInstruction synthesized(long address, String mnemonic, byte[] bytes) {
        return new CsInstruction(0, address, bytes, mnemonic, "", List.of(),
                new X86Detail(0, 8, 0, 0, 0, 0, 0, 0, List.of()));
    }

    private static int u8(byte[] b, int i) {
        return b[i] & 0xff;
    }

    @Override
    Instruction classify(CsInstruction insn) {
        X86Detail detail = (X86Detail) insn.detail();
        X86Opcode op = X86Opcode.parse(insn.bytes());
        BranchKind kind = X86ProbeRules.branchKind(op);
        OptionalLong target = OptionalLong.empty();
        Optional<PcRelative> pcRelative = Optional.empty();
        if (kind.isDirect()) {
            for (X86Operand o : detail.operands()) {
                if (o.type() == X86Operand.IMM) {
                    target = OptionalLong.of(o.imm());
                    pcRelative = Optional.of(new PcRelative(PcRelative.Kind.BRANCH, o.imm(), detail.immOffset(),
                            detail.immSize()));
                }
            }
        } else {
            for (X86Operand o : detail.operands()) {
                if (o.ripRelative()) {
                    long absolute = insn.address() + insn.length() + o.memDisp();
                    pcRelative = Optional.of(new PcRelative(PcRelative.Kind.RIP_RELATIVE, absolute,
                            detail.dispOffset(), detail.dispSize()));
                }
            }
        }
        boolean ripRelative = pcRelative.filter(p -> p.kind() == PcRelative.Kind.RIP_RELATIVE).isPresent();
        OutOfLine outOfLine = X86ProbeRules.outOfLine(op, kind, ripRelative);
        return new Instruction(insn.address(), insn.bytes(), insn.mnemonic(), insn.operands(), kind, target,
                pcRelative, outOfLine, X86ProbeRules.boostable(op, outOfLine));
    }
}
