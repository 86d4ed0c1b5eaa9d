package dev.kpemu.decoder;

import dev.kpemu.decoder.CsInstruction.Arm64Detail;
import dev.kpemu.decoder.CsInstruction.Arm64Operand;
import dev.kpemu.machine.Arch;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * AArch64 decoder: Capstone for validity, text and PC-relative targets (Capstone reports the
 * absolute target of {@code b}, {@code cbz}, {@code adr}, {@code adrp} and literal loads as an
 * immediate operand); the 32-bit encoding for control flow and kprobes decisions, since Capstone's
 * groups differ between versions (Capstone 4's {@code bl} has no call group).
 */
public final class Arm64Decoder extends CapstoneDecoder {

    /** Opens a decoder with its own Capstone handle (confined to the calling thread). */
    public Arm64Decoder() {
        super(Arch.ARM64);
    }

    @Override
    Instruction classify(CsInstruction insn) {
        int word = Arm64Encoding.word(insn.bytes());
        BranchKind kind = Arm64ProbeRules.branchKind(word);
        PcRelative.Kind pcKind = Arm64ProbeRules.pcRelativeKind(word);
        Optional<PcRelative> pcRelative = Optional.empty();
        OptionalLong target = OptionalLong.empty();
        if (pcKind != null) {
            long absolute = lastImmediate((Arm64Detail) insn.detail(), insn);
            pcRelative = Optional.of(PcRelative.of(pcKind, absolute));
            if (kind.isDirect()) target = OptionalLong.of(absolute);
        }
        return new Instruction(insn.address(), insn.bytes(), insn.mnemonic(), insn.operands(), kind, target,
                pcRelative, Arm64ProbeRules.outOfLine(word, kind), false);
    }

    private static long lastImmediate(Arm64Detail detail, CsInstruction insn) {
        for (int i = detail.operands().size() - 1; i >= 0; i--) {
            Arm64Operand o = detail.operands().get(i);
            if (o.type() == Arm64Operand.IMM) return o.imm();
        }
        throw new IllegalStateException("Capstone gave no target operand for PC-relative " + insn);
    }
}
