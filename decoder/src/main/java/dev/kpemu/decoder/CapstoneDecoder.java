package dev.kpemu.decoder;

import dev.kpemu.machine.Arch;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.OptionalLong;

/** Shared plumbing of the Capstone-backed decoders: decode with Capstone, then classify. */
abstract sealed class CapstoneDecoder implements Decoder permits X86Decoder, Arm64Decoder {
    private final Capstone capstone;

    CapstoneDecoder(Arch arch) {
        this.capstone = Capstone.open(arch);
    }

    /** Turns Capstone's view into an {@link Instruction}. */
    abstract Instruction classify(CsInstruction insn);

    /**
     * The instruction at {@code offset} of {@code code} as the arch defines it, where Capstone's
     * length is not that (default: Capstone's own); null when {@code code} ends inside it.
     */
    CsInstruction corrected(CsInstruction insn, byte[] code, int offset) {
        return insn;
    }

    /** The instruction at {@code offset} of {@code code} that Capstone does not decode but the arch defines, or null. */
    CsInstruction beyondCapstone(byte[] code, int offset, long address) {
        return null;
    }

    @Override
    public Arch arch() {
        return capstone.arch();
    }

    @Override
    public Instruction decodeOne(byte[] code, long address) {
        List<CsInstruction> one = capstone.disassemble(code, address, 1);
        CsInstruction known = one.isEmpty() ? beyondCapstone(code, 0, address) : null;
        if (known != null) return classify(known);
        if (one.isEmpty()) {
            byte[] head = Arrays.copyOf(code, Math.min(code.length, 16));
            throw new UndecodableInstructionException(address,
                    code.length == 0 ? "no bytes" : "bytes " + HexFormat.ofDelimiter(" ").formatHex(head));
        }
        CsInstruction insn = corrected(one.getFirst(), code, 0);
        if (insn == null) throw new UndecodableInstructionException(address, "an instruction longer than its bytes");
        return classify(insn);
    }

    @Override
    public Disassembly decodeAll(byte[] code, long address) {
        List<Instruction> out = new ArrayList<>();
        int decoded = 0;
        sweep:
        while (decoded < code.length) {
            byte[] rest = decoded == 0 ? code : Arrays.copyOfRange(code, decoded, code.length);
            boolean resweep = false;
            for (CsInstruction insn : capstone.disassemble(rest, address + decoded, 0)) {
                CsInstruction fixed = corrected(insn, code, decoded);
                if (fixed == null) break sweep;
                out.add(classify(fixed));
                decoded += fixed.length();
                if (fixed != insn) {   // Capstone's sweep went on from a wrong length
                    resweep = true;
                    break;
                }
            }
            if (resweep || decoded >= code.length) continue;
            CsInstruction known = beyondCapstone(code, decoded, address + decoded);
            if (known == null) break;
            out.add(classify(known));
            decoded += known.length();
        }
        OptionalLong stop = decoded < code.length ? OptionalLong.of(address + decoded) : OptionalLong.empty();
        return new Disassembly(address, code.length, out, stop);
    }

    @Override
    public void close() {
        capstone.close();
    }
}
