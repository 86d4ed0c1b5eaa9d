package dev.kpemu.decoder;

import java.util.Arrays;
import java.util.List;

/**
 * One instruction as Capstone reported it, copied out of native memory ({@code cs_insn} plus the
 * parts of {@code cs_detail} the decoders use). This is the raw binding view; the decoders turn it
 * into an {@link Instruction}.
 *
 * @param id       Capstone's instruction id ({@code x86_insn} / {@code arm64_insn})
 * @param address  address the instruction was decoded at
 * @param bytes    the instruction's bytes
 * @param mnemonic mnemonic text
 * @param operands operand text
 * @param groups   {@code cs_group_type} / arch group ids
 * @param detail   the arch-specific part of {@code cs_detail}
 */
public record CsInstruction(int id, long address, byte[] bytes, String mnemonic, String operands,
                            List<Integer> groups, Detail detail) {

    /** {@code cs_group_type} values shared by all arches. */
    public static final int GROUP_JUMP = 1, GROUP_CALL = 2, GROUP_RET = 3, GROUP_INT = 4, GROUP_IRET = 5,
            GROUP_PRIVILEGE = 6, GROUP_BRANCH_RELATIVE = 7;

    public CsInstruction {
        bytes = bytes.clone();
        groups = List.copyOf(groups);
    }

    @Override
    public byte[] bytes() {
        return bytes.clone();
    }

    /** Instruction length in bytes. */
    public int length() {
        return bytes.length;
    }

    @Override
    public String toString() {
        return String.format("%#x: %s %s %s", address, mnemonic, operands, Arrays.toString(bytes));
    }

    /** The arch-specific detail. */
    public sealed interface Detail permits X86Detail, Arm64Detail {}

    /**
     * The parts of {@code cs_x86} the x86 decoder needs. Offsets and sizes come from
     * {@code cs_x86.encoding}; an offset of 0 means "not present".
     */
    public record X86Detail(int rex, int addressSize, int modrm, int modrmOffset, int dispOffset, int dispSize,
                            int immOffset, int immSize, List<X86Operand> operands) implements Detail {
        public X86Detail {
            operands = List.copyOf(operands);
        }
    }

    /** {@code cs_x86_op}; only the union member selected by {@code type} is meaningful. */
    public record X86Operand(int type, int reg, long imm, int memBase, int memIndex, long memDisp, int size) {
        /** {@code x86_op_type}. */
        public static final int REG = 1, IMM = 2, MEM = 3;
        /** {@code X86_REG_RIP} in Capstone 5. */
        public static final int REG_RIP = 41;

        /** True for a memory operand addressed relative to RIP. */
        public boolean ripRelative() {
            return type == MEM && memBase == REG_RIP;
        }
    }

    /** The parts of {@code cs_arm64} the arm64 decoder needs. */
    public record Arm64Detail(int conditionCode, List<Arm64Operand> operands) implements Detail {
        public Arm64Detail {
            operands = List.copyOf(operands);
        }
    }

    /** {@code cs_arm64_op}; only the union member selected by {@code type} is meaningful. */
    public record Arm64Operand(int type, int reg, long imm, int memBase, int memDisp) {
        /** {@code arm64_op_type}. */
        public static final int REG = 1, IMM = 2, MEM = 3;
    }
}
