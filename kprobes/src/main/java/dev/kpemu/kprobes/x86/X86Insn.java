package dev.kpemu.kprobes.x86;

import dev.kpemu.decoder.Instruction;
import dev.kpemu.kprobes.ArchInsn;

/**
 * The x86-64 hit-time plan of a probed instruction, decided at registration (Linux 6.x
 * {@code prepare_emulation} / {@code prepare_singlestep}).
 *
 * @param kind       what to do
 * @param decoded    the decoded original (for the slot copy and its RIP-relative fix-up)
 * @param target     branch target for direct branches
 * @param cond       jcc condition (low opcode nibble); loop variant (opcode) for {@link Kind#LOOP}
 * @param reg        register number for {@code call/jmp reg}
 * @param addr32     0x67 prefix: loop/jrcxz count in ecx
 * @param popExtra   bytes {@code ret imm16} pops after the return address
 */
record X86Insn(Kind kind, Instruction decoded, long target, int cond, int reg, boolean addr32, int popExtra) implements ArchInsn {
    enum Kind { COPY, JMP, JCC, CALL, RET, LOOP, JRCXZ, CALL_REG, JMP_REG, CLI, STI, PUSHF, POPF }

    @Override public int length() { return decoded.length(); }

    @Override public boolean outOfLine() { return kind == Kind.COPY; }

    @Override public boolean boostable() { return kind == Kind.COPY && decoded.boostable(); }

    long next() { return decoded.nextAddress(); }
}
