package dev.kpemu.kprobes.arm64;

/**
 * arm64's indirect-branch landing pads, HINT-space instructions: {@code paciasp} (HINT #25),
 * {@code pacibsp} (#27), {@code bti c} (#34), {@code bti j} (#36), {@code bti jc} (#38).
 */
public final class Arm64LandingPad {
    private static final int HINT_MASK = 0xFFFFF01F, HINT = 0xD503201F;
    private static final int PACIASP = 25, PACIBSP = 27, BTI_C = 34, BTI_J = 36, BTI_JC = 38;

    private Arm64LandingPad() {}

    /** True for any landing pad: a BTI-enforcing kernel's indirect branches may land there. */
    public static boolean is(int insn) {
        if ((insn & HINT_MASK) != HINT) return false;
        int n = (insn >>> 5) & 0x7f;
        return n == PACIASP || n == PACIBSP || n == BTI_C || n == BTI_J || n == BTI_JC;
    }

    /** True for the pads a function starts with ({@code bti c}, {@code paciasp}, {@code pacibsp}). */
    public static boolean atFunctionEntry(int insn) {
        if ((insn & HINT_MASK) != HINT) return false;
        int n = (insn >>> 5) & 0x7f;
        return n == PACIASP || n == PACIBSP || n == BTI_C;
    }
}
