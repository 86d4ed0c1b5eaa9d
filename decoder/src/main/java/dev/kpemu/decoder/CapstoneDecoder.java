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

    @Override
    public Arch arch() {
        return capstone.arch();
    }

    @Override
    public Instruction decodeOne(byte[] code, long address) {
        List<CsInstruction> one = capstone.disassemble(code, address, 1);
        if (one.isEmpty()) {
            byte[] head = Arrays.copyOf(code, Math.min(code.length, 16));
            throw new UndecodableInstructionException(address,
                    code.length == 0 ? "no bytes" : "bytes " + HexFormat.ofDelimiter(" ").formatHex(head));
        }
        return classify(one.getFirst());
    }

    @Override
    public Disassembly decodeAll(byte[] code, long address) {
        List<CsInstruction> raw = capstone.disassemble(code, address, 0);
        List<Instruction> out = new ArrayList<>(raw.size());
        int decoded = 0;
        for (CsInstruction insn : raw) {
            out.add(classify(insn));
            decoded += insn.length();
        }
        OptionalLong stop = decoded < code.length ? OptionalLong.of(address + decoded) : OptionalLong.empty();
        return new Disassembly(address, code.length, out, stop);
    }

    @Override
    public void close() {
        capstone.close();
    }
}
