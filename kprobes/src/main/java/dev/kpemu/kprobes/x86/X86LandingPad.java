package dev.kpemu.kprobes.x86;

/**
 * x86 IBT's landing pad at a function entry: {@code endbr64} ({@code f3 0f 1e fa}),
 * {@code endbr32} ({@code f3 0f 1e fb}), or the 4-byte NOP the kernel seals an unneeded one
 * with at boot ({@code apply_seal_endbr}): {@code 0f 1f 40 d6} ({@code nopl -0x2a(%rax)}) in 6.1,
 * {@code 66 0f 1f 00} ({@code osp nopl (%rax)}) in later kernels — what Linux's {@code is_endbr}
 * accepts.
 * Kernels built without CONFIG_X86_KERNEL_IBT have none ({@code -fcf-protection=none}).
 */
public final class X86LandingPad {
    /** Its length: a probe on the function goes to the instruction after it. */
    public static final int LENGTH = 4;

    private X86LandingPad() {}

    public static boolean is(byte b0, byte b1, byte b2, byte b3) {
        int insn = (b0 & 0xff) | (b1 & 0xff) << 8 | (b2 & 0xff) << 16 | (b3 & 0xff) << 24;
        return insn == 0xfa1e0ff3 || insn == 0xfb1e0ff3 || insn == 0xd6401f0f || insn == 0x001f0f66;
    }
}
