package dev.kpemu.kprobes.x86;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.decoder.Disassembly;
import dev.kpemu.decoder.Instruction;
import dev.kpemu.decoder.OutOfLine;
import dev.kpemu.decoder.UndecodableInstructionException;
import dev.kpemu.decoder.X86Opcode;
import dev.kpemu.kprobes.ArchInsn;
import dev.kpemu.kprobes.Errno;
import dev.kpemu.kprobes.KprobeException;
import dev.kpemu.kprobes.ProbeDecoder;
import dev.kpemu.kprobes.SymbolResolver;
import dev.kpemu.machine.Arch;

/**
 * x86-64's registration-time decisions ({@code arch/x86/kernel/kprobes/core.c}): IBT entry
 * adjustment, {@code can_probe}'s instruction-boundary walk from the function start, the
 * instructions kprobes refuses, and the decoded form the hit path executes ({@link X86Insn}).
 */
public final class X86ProbeDecoder implements ProbeDecoder {
    private final Decoder decoder = Decoder.open(Arch.X86_64);

    @Override public Arch arch() { return Arch.X86_64; }

    /**
     * Linux with CONFIG_X86_KERNEL_IBT: a function that starts with a landing pad ({@link X86LandingPad})
     * is probed after it, so offset 0 or 4 goes to +4 and counts as the function's entry.
     */
    @Override
    public ProbeAddress adjustAddress(long functionStart, long offset, TextReader text) {
        byte[] b = text.read(functionStart, X86LandingPad.LENGTH);
        if (X86LandingPad.is(b[0], b[1], b[2], b[3])) {
            boolean entry = offset == 0 || offset == X86LandingPad.LENGTH;
            return new ProbeAddress(functionStart + (entry ? X86LandingPad.LENGTH : offset), entry);
        }
        return new ProbeAddress(functionStart + offset, offset == 0);
    }

    @Override
    public ArchInsn prepare(long address, TextReader text, SymbolResolver.SymbolInfo symbol) {
        checkBoundary(address, text, symbol);
        Instruction insn;
        try {
            insn = decoder.decodeOne(text.read(address, 16), address);
        } catch (UndecodableInstructionException e) {
            throw new KprobeException(Errno.EILSEQ, e.getMessage());
        }
        byte[] b = insn.bytes();
        X86Opcode opcode = X86Opcode.parse(b);
        boolean addr32 = opcode.hasPrefix(0x67);
        int rex = opcode.rex();
        int op = opcode.first();
        // the byte after the first opcode byte: a 0f escape's second byte, else the ModRM byte
        int modrm = opcode.length() > 1 ? opcode.opcodeByte(1) : opcode.modrm();
        if (op == 0xcc) throw new KprobeException(Errno.EINVAL, "int3 at the probe address (someone else's breakpoint)");
        if (op == 0x1f || (op == 0x8e && ((modrm >> 3) & 7) == 2)) {
            throw new KprobeException(Errno.EINVAL, insn.text() + " masks the single-step trap");
        }
        if (op == 0x0f && modrm == 0x0b && hasEmulatePrefix(text, insn)) {
            throw new KprobeException(Errno.EINVAL, "emulate prefix (ud2 + xen/kvm)");
        }
        if (insn.outOfLine() == OutOfLine.REJECT || op == 0xca || op == 0xcb) {
            throw new KprobeException(Errno.EOPNOTSUPP, "cannot probe " + insn.text());
        }
        if (insn.relocatable()) return new X86Insn(X86Insn.Kind.COPY, insn, 0, 0, 0, addr32, 0);
        long target = insn.branchTarget().orElse(0);
        if (op >= 0x70 && op <= 0x7f) return new X86Insn(X86Insn.Kind.JCC, insn, target, op & 0xf, 0, addr32, 0);
        if (op == 0x0f) return new X86Insn(X86Insn.Kind.JCC, insn, target, modrm & 0xf, 0, addr32, 0);
        return switch (op) {
            case 0xe9, 0xeb -> new X86Insn(X86Insn.Kind.JMP, insn, target, 0, 0, addr32, 0);
            case 0xe8 -> new X86Insn(X86Insn.Kind.CALL, insn, target, 0, 0, addr32, 0);
            case 0xc3 -> new X86Insn(X86Insn.Kind.RET, insn, 0, 0, 0, addr32, 0);
            case 0xc2 -> new X86Insn(X86Insn.Kind.RET, insn, 0, 0, 0, addr32, (b[b.length - 2] & 0xff) | (b[b.length - 1] & 0xff) << 8);
            case 0xe0, 0xe1, 0xe2 -> new X86Insn(X86Insn.Kind.LOOP, insn, target, op, 0, addr32, 0);
            case 0xe3 -> new X86Insn(X86Insn.Kind.JRCXZ, insn, target, 0, 0, addr32, 0);
            case 0xfa -> new X86Insn(X86Insn.Kind.CLI, insn, 0, 0, 0, addr32, 0);
            case 0xfb -> new X86Insn(X86Insn.Kind.STI, insn, 0, 0, 0, addr32, 0);
            case 0x9c -> new X86Insn(X86Insn.Kind.PUSHF, insn, 0, 0, 0, addr32, 0);
            case 0x9d -> new X86Insn(X86Insn.Kind.POPF, insn, 0, 0, 0, addr32, 0);
            case 0xff -> {
                int reg = (modrm & 7) | ((rex & 1) << 3);
                yield new X86Insn(((modrm >> 3) & 7) == 2 ? X86Insn.Kind.CALL_REG : X86Insn.Kind.JMP_REG, insn, 0, 0, reg, addr32, 0);
            }
            default -> throw new KprobeException(Errno.EOPNOTSUPP, "no emulation for " + insn.text());
        };
    }

    @Override
    public boolean isExceptionInstruction(long address, TextReader text) {
        X86Opcode opcode = X86Opcode.parse(text.read(address, 16));
        int op = opcode.first();
        if (op == 0x0f && opcode.length() > 1) {
            int second = opcode.opcodeByte(1);
            return second == 0xff || second == 0xb9 || second == 0x0b;
        }
        return op == 0xcc || op == 0xcd || op == 0xce || op == 0xf1;
    }

    /** {@code can_probe}: decoding from the symbol's start must land exactly on the address. */
    private void checkBoundary(long address, TextReader text, SymbolResolver.SymbolInfo symbol) {
        long off = address - symbol.start();
        if (off == 0) return;
        if (off < 0 || off > (1 << 20)) throw new KprobeException(Errno.EILSEQ, "address outside its symbol");
        Disassembly d = decoder.decodeAll(text.read(symbol.start(), (int) off + 16), symbol.start());
        if (!d.isBoundary(address)) {
            throw new KprobeException(Errno.EILSEQ, String.format("0x%x is not an instruction boundary in %s", address, symbol.name()));
        }
    }

    private static boolean hasEmulatePrefix(TextReader text, Instruction insn) {
        byte[] after = text.read(insn.nextAddress(), 3);
        String s = new String(after, java.nio.charset.StandardCharsets.ISO_8859_1);
        return s.equals("xen") || s.equals("kvm");
    }

    @Override
    public void close() { decoder.close(); }
}
