package dev.kpemu.decoder;

/**
 * AArch64 encoding classes as (mask, value) pairs, the same ones Linux uses in
 * {@code arch/arm64/include/asm/insn.h} and {@code arch/arm64/kernel/probes/decode-insn.c}.
 */
enum Arm64Encoding {
    B(0xFC000000, 0x14000000),
    BL(0xFC000000, 0x94000000),
    B_COND(0xFF000010, 0x54000000),
    /** {@code b.cond} and FEAT_HBC {@code bc.cond}. */
    ANY_B_COND(0xFF000000, 0x54000000),
    CBZ_CBNZ(0x7E000000, 0x34000000),
    TBZ_TBNZ(0x7E000000, 0x36000000),
    /** Kernel masks: Rm == 0, i.e. not the pointer-authenticated forms. */
    BR(0xFFFFFC1F, 0xD61F0000),
    BLR(0xFFFFFC1F, 0xD63F0000),
    RET(0xFFFFFC1F, 0xD65F0000),
    /** Unconditional branch (register) class: br/blr/ret/eret/drps and their PAC forms. */
    BRANCH_REGISTER(0xFE000000, 0xD6000000),
    ADR(0x9F000000, 0x10000000),
    ADRP(0x9F000000, 0x90000000),
    LDR_LITERAL(0xBF000000, 0x18000000),
    LDRSW_LITERAL(0xFF000000, 0x98000000),
    PRFM_LITERAL(0xFF000000, 0xD8000000),
    /** SIMD/FP {@code ldr} literal (V = 1), which the kernel misses. */
    SIMD_LDR_LITERAL(0x3F000000, 0x1C000000),
    /** LDXR/STXR/LDAXR/STLXR/LDXP/STXP… (not LDAR/STLR/CAS). */
    EXCLUSIVE(0x3F800000, 0x08000000),
    LOAD_EXCLUSIVE(0x3F400000, 0x08400000),
    STORE_EXCLUSIVE(0x3F400000, 0x08000000),
    /** SVC, HVC, SMC, BRK, HLT, DCPS. */
    EXCEPTION(0xFF000000, 0xD4000000),
    /** {@code udf #imm16}: permanently undefined. */
    UDF(0xFFFF0000, 0x00000000),
    MSR_IMMEDIATE(0xFFF8F01F, 0xD500401F),
    MSR_REGISTER(0xFFF00000, 0xD5100000),
    MRS(0xFFF00000, 0xD5300000),
    /** {@code mrs xT, daif}. */
    MRS_DAIF(0xFFFFFFE0, 0xD53B4220),
    HINT(0xFFFFF01F, 0xD503201F),
    NOP(0xFFFFFFFF, 0xD503201F);

    private final int mask;
    private final int value;

    Arm64Encoding(int mask, int value) {
        this.mask = mask;
        this.value = value;
    }

    boolean matches(int word) {
        return (word & mask) == value;
    }

    /** The little-endian 32-bit word at the start of {@code bytes}. */
    static int word(byte[] bytes) {
        return (bytes[0] & 0xff) | (bytes[1] & 0xff) << 8 | (bytes[2] & 0xff) << 16 | (bytes[3] & 0xff) << 24;
    }
}
