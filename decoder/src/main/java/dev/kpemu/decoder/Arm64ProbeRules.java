package dev.kpemu.decoder;

import static dev.kpemu.decoder.Arm64Encoding.*;

import java.util.Set;

/**
 * Linux arm64 kprobes decisions ({@code arm_kprobe_decode_insn}, {@code aarch64_insn_is_steppable})
 * and the control-flow class of each encoding.
 *
 * <p>Differences from the kernel, all towards caution: {@code udf} is a trap and refused (the kernel
 * would step it); SIMD/FP {@code ldr} literal is treated as PC-relative and refused (the kernel
 * steps it from the slot with a wrong address). The "inside an LDXR…STXR window" check needs the
 * surrounding code and is left to the caller. arm64 has no boosting.
 */
final class Arm64ProbeRules {
    private Arm64ProbeRules() {}

    /** HINT numbers ({@code CRm:op2}) that may be stepped: NOP, XPACLRI, PACIA1716, PACIB1716, PACIAZ, PACIASP, PACIBZ, PACIBSP, BTI*. */
    private static final Set<Integer> STEPPABLE_HINTS = Set.of(0, 7, 8, 10, 24, 25, 26, 27, 32, 34, 36, 38);

    /** Control-flow class of {@code word}. */
    static BranchKind branchKind(int word) {
        if (B.matches(word)) return BranchKind.JUMP;
        if (BL.matches(word)) return BranchKind.CALL;
        if (ANY_B_COND.matches(word) || CBZ_CBNZ.matches(word) || TBZ_TBNZ.matches(word)) {
            return BranchKind.CONDITIONAL_JUMP;
        }
        if (BRANCH_REGISTER.matches(word)) {
            return switch ((word >>> 21) & 0xf) {
                case 0, 8 -> BranchKind.INDIRECT_JUMP;    // br, braaz/brabz, braa/brab
                case 1, 9 -> BranchKind.INDIRECT_CALL;    // blr, blraaz/blrabz, blraa/blrab
                case 2, 4, 5 -> BranchKind.RETURN;        // ret/retaa/retab, eret/eretaa/eretab, drps
                default -> BranchKind.NONE;
            };
        }
        if (EXCEPTION.matches(word) || UDF.matches(word)) return BranchKind.TRAP;
        return BranchKind.NONE;
    }

    /** The PC-relative kind of {@code word}, or null. */
    static PcRelative.Kind pcRelativeKind(int word) {
        if (B.matches(word) || BL.matches(word) || ANY_B_COND.matches(word) || CBZ_CBNZ.matches(word)
                || TBZ_TBNZ.matches(word)) {
            return PcRelative.Kind.BRANCH;
        }
        if (ADR.matches(word)) return PcRelative.Kind.ADR;
        if (ADRP.matches(word)) return PcRelative.Kind.ADRP;
        if (usesLiteral(word)) return PcRelative.Kind.LOAD_LITERAL;
        return null;
    }

    /** How {@code word} can be run out of line. */
    static OutOfLine outOfLine(int word, BranchKind kind) {
        if (kind == BranchKind.TRAP) return OutOfLine.REJECT;
        if (LDR_LITERAL.matches(word) || LDRSW_LITERAL.matches(word)) return OutOfLine.SIMULATE;
        if (NOP.matches(word)) return OutOfLine.SIMULATE;
        if (steppable(word)) return OutOfLine.COPY;
        if (B_COND.matches(word) || CBZ_CBNZ.matches(word) || TBZ_TBNZ.matches(word) || ADR.matches(word)
                || ADRP.matches(word) || B.matches(word) || BL.matches(word) || BR.matches(word)
                || BLR.matches(word) || RET.matches(word)) {
            return OutOfLine.SIMULATE;
        }
        return OutOfLine.REJECT;
    }

    /** {@code aarch64_insn_is_steppable}: may the word run from an XOL slot? */
    static boolean steppable(int word) {
        int op0 = (word >>> 25) & 0xf;
        if (op0 == 0xA || op0 == 0xB) { // branch, exception generation, system
            if (branchKind(word) != BranchKind.NONE) return false;
            if (MSR_IMMEDIATE.matches(word) || MSR_REGISTER.matches(word)) return false;
            // every MRS but a read of DAIF, which stepping itself changes (recorded: Linux 6.1
            // accepts a probe on "mrs x0, sp_el0" at get_signal+0x10)
            if (MRS.matches(word)) return !MRS_DAIF.matches(word);
            if (HINT.matches(word)) return STEPPABLE_HINTS.contains((word >>> 5) & 0x7f);
            return true;
        }
        if (usesLiteral(word)) return false;
        return !EXCLUSIVE.matches(word);
    }

    private static boolean usesLiteral(int word) {
        return LDR_LITERAL.matches(word) || LDRSW_LITERAL.matches(word) || ADR.matches(word) || ADRP.matches(word)
                || PRFM_LITERAL.matches(word) || SIMD_LDR_LITERAL.matches(word);
    }
}
