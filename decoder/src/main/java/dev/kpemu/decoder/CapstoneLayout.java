package dev.kpemu.decoder;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.MemoryLayout.paddingLayout;
import static java.lang.foreign.MemoryLayout.sequenceLayout;
import static java.lang.foreign.MemoryLayout.structLayout;
import static java.lang.foreign.MemoryLayout.unionLayout;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;

/**
 * Capstone 5 struct layouts (x86-64 SysV ABI), transcribed from {@code capstone.h}, {@code x86.h}
 * and {@code arm64.h} of Capstone 5.0.7. Offsets are derived from the layouts, never written by hand.
 */
final class CapstoneLayout {
    private CapstoneLayout() {}

    static final int MNEMONIC_SIZE = 32;
    static final int OP_STR_SIZE = 160;
    static final int MAX_OPERANDS = 8;

    /** {@code cs_insn}. */
    static final StructLayout INSN = structLayout(
            JAVA_INT.withName("id"),
            paddingLayout(4),
            JAVA_LONG.withName("address"),
            JAVA_SHORT.withName("size"),
            sequenceLayout(24, JAVA_BYTE).withName("bytes"),
            sequenceLayout(MNEMONIC_SIZE, JAVA_BYTE).withName("mnemonic"),
            sequenceLayout(OP_STR_SIZE, JAVA_BYTE).withName("op_str"),
            paddingLayout(6),
            ADDRESS.withName("detail"));

    /** The arch-independent head of {@code cs_detail}; the arch union follows at {@link #DETAIL_ARCH}. */
    static final StructLayout DETAIL_HEAD = structLayout(
            sequenceLayout(20, JAVA_SHORT).withName("regs_read"),
            JAVA_BYTE.withName("regs_read_count"),
            paddingLayout(1),
            sequenceLayout(20, JAVA_SHORT).withName("regs_write"),
            JAVA_BYTE.withName("regs_write_count"),
            sequenceLayout(8, JAVA_BYTE).withName("groups"),
            JAVA_BYTE.withName("groups_count"),
            JAVA_BYTE.withName("writeback"),
            paddingLayout(3));

    /** {@code cs_x86_op}. */
    static final StructLayout X86_OP = structLayout(
            JAVA_INT.withName("type"),
            paddingLayout(4),
            unionLayout(
                    JAVA_INT.withName("reg"),
                    JAVA_LONG.withName("imm"),
                    structLayout(
                            JAVA_INT.withName("segment"),
                            JAVA_INT.withName("base"),
                            JAVA_INT.withName("index"),
                            JAVA_INT.withName("scale"),
                            JAVA_LONG.withName("disp")).withName("mem")).withName("value"),
            JAVA_BYTE.withName("size"),
            JAVA_BYTE.withName("access"),
            paddingLayout(2),
            JAVA_INT.withName("avx_bcast"),
            JAVA_BYTE.withName("avx_zero_opmask"),
            paddingLayout(7));

    /** {@code cs_x86_encoding}. */
    static final StructLayout X86_ENCODING = structLayout(
            JAVA_BYTE.withName("modrm_offset"),
            JAVA_BYTE.withName("disp_offset"),
            JAVA_BYTE.withName("disp_size"),
            JAVA_BYTE.withName("imm_offset"),
            JAVA_BYTE.withName("imm_size"));

    /** {@code cs_x86}. */
    static final StructLayout X86 = structLayout(
            sequenceLayout(4, JAVA_BYTE).withName("prefix"),
            sequenceLayout(4, JAVA_BYTE).withName("opcode"),
            JAVA_BYTE.withName("rex"),
            JAVA_BYTE.withName("addr_size"),
            JAVA_BYTE.withName("modrm"),
            JAVA_BYTE.withName("sib"),
            paddingLayout(4),
            JAVA_LONG.withName("disp"),
            JAVA_INT.withName("sib_index"),
            JAVA_BYTE.withName("sib_scale"),
            paddingLayout(3),
            JAVA_INT.withName("sib_base"),
            JAVA_INT.withName("xop_cc"),
            JAVA_INT.withName("sse_cc"),
            JAVA_INT.withName("avx_cc"),
            JAVA_BYTE.withName("avx_sae"),
            paddingLayout(3),
            JAVA_INT.withName("avx_rm"),
            JAVA_LONG.withName("eflags"),
            JAVA_BYTE.withName("op_count"),
            paddingLayout(7),
            sequenceLayout(MAX_OPERANDS, X86_OP).withName("operands"),
            X86_ENCODING.withName("encoding"),
            paddingLayout(3));

    /** {@code cs_arm64_op}. */
    static final StructLayout ARM64_OP = structLayout(
            JAVA_INT.withName("vector_index"),
            JAVA_INT.withName("vas"),
            structLayout(JAVA_INT.withName("type"), JAVA_INT.withName("value")).withName("shift"),
            JAVA_INT.withName("ext"),
            JAVA_INT.withName("type"),
            JAVA_INT.withName("svcr"),
            paddingLayout(4),
            unionLayout(
                    JAVA_INT.withName("reg"),
                    JAVA_LONG.withName("imm"),
                    JAVA_DOUBLE.withName("fp"),
                    structLayout(JAVA_INT.withName("base"), JAVA_INT.withName("index"), JAVA_INT.withName("disp"))
                            .withName("mem"),
                    paddingLayout(16)).withName("value"),
            JAVA_BYTE.withName("access"),
            paddingLayout(7));

    /** {@code cs_arm64}. */
    static final StructLayout ARM64 = structLayout(
            JAVA_INT.withName("cc"),
            JAVA_BYTE.withName("update_flags"),
            JAVA_BYTE.withName("writeback"),
            JAVA_BYTE.withName("post_index"),
            JAVA_BYTE.withName("op_count"),
            sequenceLayout(MAX_OPERANDS, ARM64_OP).withName("operands"));

    // cs_insn
    static final long INSN_ID = offset(INSN, "id");
    static final long INSN_ADDRESS = offset(INSN, "address");
    static final long INSN_SIZE = offset(INSN, "size");
    static final long INSN_BYTES = offset(INSN, "bytes");
    static final long INSN_MNEMONIC = offset(INSN, "mnemonic");
    static final long INSN_OP_STR = offset(INSN, "op_str");
    static final long INSN_DETAIL = offset(INSN, "detail");

    // cs_detail
    static final long DETAIL_GROUPS = offset(DETAIL_HEAD, "groups");
    static final long DETAIL_GROUPS_COUNT = offset(DETAIL_HEAD, "groups_count");
    /** The arch union starts at the 8-byte aligned end of the head. */
    static final long DETAIL_ARCH = DETAIL_HEAD.byteSize();
    static final long DETAIL_SIZE = DETAIL_ARCH + Math.max(X86.byteSize(), ARM64.byteSize());

    // cs_x86
    static final long X86_PREFIX = offset(X86, "prefix");
    static final long X86_OPCODE = offset(X86, "opcode");
    static final long X86_REX = offset(X86, "rex");
    static final long X86_ADDR_SIZE = offset(X86, "addr_size");
    static final long X86_MODRM = offset(X86, "modrm");
    static final long X86_OP_COUNT = offset(X86, "op_count");
    static final long X86_OPERANDS = offset(X86, "operands");
    static final long X86_ENC_MODRM_OFFSET = offset(X86, "encoding", "modrm_offset");
    static final long X86_ENC_DISP_OFFSET = offset(X86, "encoding", "disp_offset");
    static final long X86_ENC_DISP_SIZE = offset(X86, "encoding", "disp_size");
    static final long X86_ENC_IMM_OFFSET = offset(X86, "encoding", "imm_offset");
    static final long X86_ENC_IMM_SIZE = offset(X86, "encoding", "imm_size");

    // cs_x86_op
    static final long X86_OP_TYPE = offset(X86_OP, "type");
    static final long X86_OP_REG = offset(X86_OP, "value", "reg");
    static final long X86_OP_IMM = offset(X86_OP, "value", "imm");
    static final long X86_OP_MEM_BASE = offset(X86_OP, "value", "mem", "base");
    static final long X86_OP_MEM_INDEX = offset(X86_OP, "value", "mem", "index");
    static final long X86_OP_MEM_DISP = offset(X86_OP, "value", "mem", "disp");
    static final long X86_OP_SIZE = offset(X86_OP, "size");

    // cs_arm64
    static final long ARM64_CC = offset(ARM64, "cc");
    static final long ARM64_OP_COUNT = offset(ARM64, "op_count");
    static final long ARM64_OPERANDS = offset(ARM64, "operands");

    // cs_arm64_op
    static final long ARM64_OP_TYPE = offset(ARM64_OP, "type");
    static final long ARM64_OP_REG = offset(ARM64_OP, "value", "reg");
    static final long ARM64_OP_IMM = offset(ARM64_OP, "value", "imm");
    static final long ARM64_OP_MEM_BASE = offset(ARM64_OP, "value", "mem", "base");
    static final long ARM64_OP_MEM_DISP = offset(ARM64_OP, "value", "mem", "disp");

    private static long offset(MemoryLayout layout, String... path) {
        MemoryLayout.PathElement[] elements = new MemoryLayout.PathElement[path.length];
        for (int i = 0; i < path.length; i++) elements[i] = groupElement(path[i]);
        return layout.byteOffset(elements);
    }
}
