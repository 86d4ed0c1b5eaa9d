package dev.kpemu.kprobes.arm64;

import static dev.kpemu.kprobes.arm64.Arm64Kprobes.word;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.decoder.Instruction;
import dev.kpemu.decoder.OutOfLine;
import dev.kpemu.decoder.UndecodableInstructionException;
import dev.kpemu.kprobes.ArchInsn;
import dev.kpemu.kprobes.Errno;
import dev.kpemu.kprobes.KprobeException;
import dev.kpemu.kprobes.ProbeDecoder;
import dev.kpemu.kprobes.SymbolResolver;
import dev.kpemu.machine.Arch;

/**
 * arm64's registration-time decisions ({@code arch/arm64/kernel/probes/decode-insn.c}): 4-byte
 * alignment, the instructions kprobes rejects, load/store-exclusive sequences, and the decoded
 * form the hit path executes ({@link Arm64Insn}: copied to a slot or simulated).
 */
public final class Arm64ProbeDecoder implements ProbeDecoder {
    /** {@code MAX_ATOMIC_CONTEXT_SIZE}: instructions scanned back for an open LDXR…STXR sequence. */
    private static final int MAX_ATOMIC_CONTEXT = dev.kpemu.decoder.Arm64ExclusiveWindow.MAX_ATOMIC_CONTEXT_SIZE;

    private final Decoder decoder = Decoder.open(Arch.ARM64);

    @Override public Arch arch() { return Arch.ARM64; }

    @Override
    public ArchInsn prepare(long address, TextReader text, SymbolResolver.SymbolInfo symbol) {
        if ((address & 3) != 0) throw new KprobeException(Errno.EINVAL, String.format("0x%x is not 4-byte aligned", address));
        byte[] bytes = text.read(address, 4);
        int w = word(bytes, 0);
        Instruction insn;
        try {
            insn = decoder.decodeOne(bytes, address);
        } catch (UndecodableInstructionException e) {
            throw new KprobeException(Errno.EINVAL, e.getMessage());
        }
        if (insn.outOfLine() == OutOfLine.REJECT) throw new KprobeException(Errno.EINVAL, "cannot probe " + insn.text());
        if (insideExclusiveSequence(address, text, symbol)) {
            throw new KprobeException(Errno.EINVAL, String.format("0x%x is inside a load/store-exclusive sequence", address));
        }
        if (insn.outOfLine() != OutOfLine.SIMULATE) return new Arm64Insn(Arm64Insn.Kind.COPY, w);
        Arm64Insn.Kind kind;
        if ((w & 0xFC000000) == 0x14000000) kind = Arm64Insn.Kind.B;
        else if ((w & 0xFC000000) == 0x94000000) kind = Arm64Insn.Kind.BL;
        else if ((w & 0xFF000010) == 0x54000000) kind = Arm64Insn.Kind.B_COND;
        else if ((w & 0x7F000000) == 0x34000000) kind = Arm64Insn.Kind.CBZ;
        else if ((w & 0x7F000000) == 0x35000000) kind = Arm64Insn.Kind.CBNZ;
        else if ((w & 0x7F000000) == 0x36000000) kind = Arm64Insn.Kind.TBZ;
        else if ((w & 0x7F000000) == 0x37000000) kind = Arm64Insn.Kind.TBNZ;
        else if ((w & 0x9F000000) == 0x10000000) kind = Arm64Insn.Kind.ADR;
        else if ((w & 0x9F000000) == 0x90000000) kind = Arm64Insn.Kind.ADRP;
        else if ((w & 0xBF000000) == 0x18000000) kind = Arm64Insn.Kind.LDR_LITERAL;
        else if ((w & 0xFF000000) == 0x98000000) kind = Arm64Insn.Kind.LDRSW_LITERAL;
        else if ((w & 0xFFFFFC1F) == 0xD61F0000) kind = Arm64Insn.Kind.BR;
        else if ((w & 0xFFFFFC1F) == 0xD63F0000) kind = Arm64Insn.Kind.BLR;
        else if ((w & 0xFFFFFC1F) == 0xD65F0000) kind = Arm64Insn.Kind.RET;
        else if (w == 0xD503201F) kind = Arm64Insn.Kind.NOP;
        else throw new KprobeException(Errno.EINVAL, "no simulation for " + insn.text());
        return new Arm64Insn(kind, w);
    }

    /** Inside a load/store-exclusive sequence ({@link dev.kpemu.decoder.Arm64ExclusiveWindow}), not looking before the symbol. */
    private static boolean insideExclusiveSequence(long address, TextReader text, SymbolResolver.SymbolInfo symbol) {
        int n = (int) Math.min(MAX_ATOMIC_CONTEXT, (address - symbol.start()) / 4);
        if (n <= 0) return false;
        byte[] window = text.read(address - 4L * n, 4 * n);
        return dev.kpemu.decoder.Arm64ExclusiveWindow.openLoadExclusive(window, window.length) > 0;
    }

    @Override
    public void close() { decoder.close(); }
}
