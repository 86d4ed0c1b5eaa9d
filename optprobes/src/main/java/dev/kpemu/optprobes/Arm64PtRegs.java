package dev.kpemu.optprobes;

/**
 * The frame an arm64 detour builds on the stack at its hand-off point: the first fields of Linux's
 * {@code struct pt_regs} ({@code arch/arm64/include/asm/ptrace.h}: {@code regs[31]}, {@code sp},
 * {@code pc}, {@code pstate}). At the hand-off {@code sp} points at the frame.
 *
 * <p>Slots the detour restores: {@code x0}–{@code x30} and the NZCV bits of {@code pstate}. Slots for
 * the handler's view only (changes ignored): {@code sp} (stack pointer at the probe), {@code pc} (the
 * probe address, as for a {@code BRK} probe on arm64), the DAIF bits of {@code pstate}.
 */
public final class Arm64PtRegs {
    private Arm64PtRegs() {}

    /** Offset of {@code x}<i>n</i> (0–30). */
    public static int x(int n) {
        if (n < 0 || n > 30) throw new IllegalArgumentException("x" + n);
        return 8 * n;
    }

    public static final int SP = 248, PC = 256, PSTATE = 264;
    /** Frame size (16-byte aligned, as the stack pointer must stay). */
    public static final int SIZE = 272;
}
