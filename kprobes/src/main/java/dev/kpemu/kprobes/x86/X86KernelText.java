package dev.kpemu.kprobes.x86;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

import dev.kpemu.kprobes.ArchKernelText;

/**
 * x86-64 kernel text: function entries (an optional IBT landing pad, {@link X86LandingPad}, then
 * the {@code __fentry__} call site) and jump-label sites (a 2- or 5-byte NOP).
 */
public final class X86KernelText implements ArchKernelText {
    public static final X86KernelText INSTANCE = new X86KernelText();

    /** The 5-byte NOP ftrace writes over {@code call __fentry__} ({@code x86_nops[5]}). */
    static final byte[] NOP5 = {0x0f, 0x1f, 0x44, 0x00, 0x00};
    private static final int CALL_REL32 = 0xe8, SITE_LENGTH = 5;

    private X86KernelText() {}

    @Override public int entryBytes() { return X86LandingPad.LENGTH + SITE_LENGTH; }

    @Override
    public int probeSkip(byte[] code) {
        return code.length >= X86LandingPad.LENGTH && X86LandingPad.is(code[0], code[1], code[2], code[3]) ? X86LandingPad.LENGTH : 0;
    }

    @Override
    public int ftraceSite(byte[] code) {
        int off = probeSkip(code);
        if (code.length < off + SITE_LENGTH) return -1;
        boolean site = (code[off] & 0xff) == CALL_REL32 || Arrays.equals(code, off, off + SITE_LENGTH, NOP5, 0, SITE_LENGTH);
        return site ? off : -1;
    }

    @Override public int jumpLabelSiteBytes() { return SITE_LENGTH; }

    @Override
    public byte[] jumpOver(byte[] site, long code, long target) {
        if ((site[0] & 0xff) == 0x66 && (site[1] & 0xff) == 0x90) {
            long rel = target - (code + 2);
            return new byte[] {(byte) 0xeb, (byte) rel};
        }
        if (Arrays.equals(site, 0, SITE_LENGTH, NOP5, 0, SITE_LENGTH)) {
            long rel = target - (code + 5);
            return ByteBuffer.allocate(5).order(ByteOrder.LITTLE_ENDIAN).put((byte) 0xe9).putInt((int) rel).array();
        }
        return null;
    }
}
