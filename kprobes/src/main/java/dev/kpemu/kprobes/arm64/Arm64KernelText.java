package dev.kpemu.kprobes.arm64;

import dev.kpemu.kprobes.ArchKernelText;

/**
 * arm64 kernel text: function entries (an optional landing pad,
 * {@link Arm64LandingPad#atFunctionEntry}, then, in a function built with ftrace, the
 * {@code -fpatchable-function-entry=2} pair whose second instruction is the call site) and
 * jump-label sites (a {@code nop}).
 */
public final class Arm64KernelText implements ArchKernelText {
    public static final Arm64KernelText INSTANCE = new Arm64KernelText();

    static final int NOP = 0xd503201f, MOV_X9_X30 = 0xaa1e03e9;

    private Arm64KernelText() {}

    @Override public int entryBytes() { return 12; }

    /** Linux's arm64 kprobes probe the landing pad itself. */
    @Override public int probeSkip(byte[] code) { return 0; }

    @Override
    public int ftraceSite(byte[] code) {
        if (code.length < 8) return -1;
        int at = Arm64LandingPad.atFunctionEntry(Arm64Kprobes.word(code, 0)) ? 4 : 0;
        if (code.length < at + 8) return -1;
        int w0 = Arm64Kprobes.word(code, at), w1 = Arm64Kprobes.word(code, at + 4);
        boolean first = w0 == NOP || w0 == MOV_X9_X30;
        boolean second = w1 == NOP || (w1 & 0xfc00_0000) == 0x9400_0000; // nop or bl
        return first && second ? at + 4 : -1;
    }

    @Override public int jumpLabelSiteBytes() { return 4; }

    @Override
    public byte[] jumpOver(byte[] site, long code, long target) {
        if (Arm64Kprobes.word(site, 0) != NOP) return null;
        int insn = 0x14000000 | (int) (((target - code) >> 2) & 0x03ffffff);
        return Arm64Kprobes.le(insn);
    }
}
