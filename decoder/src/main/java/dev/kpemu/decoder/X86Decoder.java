package dev.kpemu.decoder;

import dev.kpemu.decoder.CsInstruction.X86Detail;
import dev.kpemu.decoder.CsInstruction.X86Operand;
import dev.kpemu.machine.Arch;
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
