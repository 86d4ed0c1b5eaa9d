package dev.kpemu.optprobes;

/**
 * The frame an x86-64 detour builds on the stack at its hand-off point, laid out like Linux's
 * {@code struct pt_regs} ({@code arch/x86/include/asm/ptrace.h}), so a host handler reads and writes
 * it exactly as a kernel handler reads {@code regs}. At the hand-off {@code rsp} points at the frame.
 *
 * <p>Slots the detour restores: the 15 general registers and {@code flags}. Slots filled for the
 * handler's view only (changes are ignored, as for a Linux optprobe): {@code sp} (the stack pointer
 * at the probe), {@code ip} (probe address + 1, as after an {@code int3}), {@code cs}
 * ({@code __KERNEL_CS}), {@code ss} ({@code __KERNEL_DS}), {@code orig_ax} (-1).
 */
public final class X86PtRegs {
    private X86PtRegs() {}

    public static final int R15 = 0, R14 = 8, R13 = 16, R12 = 24, RBP = 32, RBX = 40, R11 = 48, R10 = 56, R9 = 64,
            R8 = 72, RAX = 80, RCX = 88, RDX = 96, RSI = 104, RDI = 112, ORIG_AX = 120, IP = 128, CS = 136,
            FLAGS = 144, SP = 152, SS = 160;
    /** {@code sizeof(struct pt_regs)} on x86-64. */
    public static final int SIZE = 168;
    /** {@code __KERNEL_CS} and {@code __KERNEL_DS} of x86-64 Linux. */
    public static final long KERNEL_CS = 0x10, KERNEL_DS = 0x18;

    /**
     * The general registers the detour saves and restores, as {machine register number, frame offset}
     * (machine numbers: rax 0, rcx 1, rdx 2, rbx 3, rbp 5, rsi 6, rdi 7, r8–r15 8–15).
     */
    static final int[][] GPRS = {
        {0, RAX}, {1, RCX}, {2, RDX}, {3, RBX}, {5, RBP}, {6, RSI}, {7, RDI}, {8, R8}, {9, R9}, {10, R10},
        {11, R11}, {12, R12}, {13, R13}, {14, R14}, {15, R15},
    };

    /** The 8-byte little-endian value at {@code offset} of {@code frame}. */
    public static long get(byte[] frame, int offset) {
        long v = 0;
        for (int k = 7; k >= 0; k--) v = v << 8 | (frame[offset + k] & 0xff);
        return v;
    }

    /** Stores {@code value} at {@code offset} of {@code frame}. */
    public static void set(byte[] frame, int offset, long value) {
        for (int k = 0; k < 8; k++) frame[offset + k] = (byte) (value >>> (8 * k));
    }
}
