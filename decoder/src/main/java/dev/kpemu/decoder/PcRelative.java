package dev.kpemu.decoder;

/**
 * A PC-relative reference made by an instruction.
 *
 * @param kind         what the reference is
 * @param target       the absolute address referred to
 * @param fieldOffset  x86: offset within the instruction of the displacement / relative-immediate
 *                     field (from {@code cs_x86.encoding}); arm64: 0 (the offset is a bit field)
 * @param fieldSize    x86: size of that field in bytes; arm64: 0
 */
public record PcRelative(Kind kind, long target, int fieldOffset, int fieldSize) {

    /** Kinds of PC-relative reference. */
    public enum Kind {
        /** x86 {@code [rip + disp32]} memory operand or {@code lea} address computation. */
        RIP_RELATIVE,
        /** A direct branch or call with a PC-relative immediate (x86 {@code rel8/rel32}, arm64 {@code imm26/imm19/imm14}). */
        BRANCH,
        /** arm64 {@code adr}: target = pc + imm21. */
        ADR,
        /** arm64 {@code adrp}: target = (pc & ~0xfff) + (imm21 << 12). */
        ADRP,
        /** arm64 literal load ({@code ldr}/{@code ldrsw}/{@code prfm} literal, SIMD/FP {@code ldr} literal). */
        LOAD_LITERAL
    }

    /** A reference with no byte-addressable field (arm64). */
    static PcRelative of(Kind kind, long target) {
        return new PcRelative(kind, target, 0, 0);
    }
}
