package dev.kpemu.decoder;

/**
 * The prefix and opcode structure of one x86-64 instruction, parsed from its bytes the way
 * Linux's instruction decoder sees it ({@code insn->prefixes}, {@code insn->opcode}). Capstone's
 * {@code cs_x86.opcode} is not used because it drops the {@code 0f 38}/{@code 0f 3a} escapes.
 *
 * @param legacyPrefixes bit set of the legacy prefixes present (see {@link #hasPrefix(int)})
 * @param rex            the REX byte, or 0
 * @param vex            true for VEX/EVEX/XOP-encoded instructions (opcode fields then unused)
 * @param opcode         the opcode bytes including {@code 0f} escapes (1 to 3 bytes)
 * @param modrm          the byte after the opcode (the ModRM byte where the opcode has one), or -1
 */
public record X86Opcode(int legacyPrefixes, int rex, boolean vex, int[] opcode, int modrm) {

    private static final int[] LEGACY_PREFIXES = {0xf0, 0xf2, 0xf3, 0x2e, 0x36, 0x3e, 0x26, 0x64, 0x65, 0x66, 0x67};

    /** The structure of the instruction whose bytes are {@code b}. */
    public static X86Opcode parse(byte[] b) {
        int i = 0, prefixes = 0, rex = 0;
        for (int bit; i < b.length && (bit = prefixBit(u8(b, i))) != 0; i++) prefixes |= bit;
        if (i < b.length && (u8(b, i) & 0xf0) == 0x40) rex = u8(b, i++);
        int lead = i < b.length ? u8(b, i) : -1;
        boolean vex = lead == 0xc4 || lead == 0xc5 || lead == 0x62
                || (lead == 0x8f && i + 1 < b.length && (u8(b, i + 1) & 0x38) != 0);
        if (vex || lead < 0) return new X86Opcode(prefixes, rex, vex, new int[] {Math.max(lead, 0)}, -1);
        int len = 1;
        if (lead == 0x0f && i + 1 < b.length) {
            int second = u8(b, i + 1);
            len = second == 0x38 || second == 0x3a ? 3 : 2;
        }
        len = Math.min(len, b.length - i);
        int[] opcode = new int[len];
        for (int k = 0; k < len; k++) opcode[k] = u8(b, i + k);
        int modrm = i + len < b.length ? u8(b, i + len) : -1;
        return new X86Opcode(prefixes, rex, false, opcode, modrm);
    }

    /** True if legacy prefix byte {@code prefix} (e.g. {@code 0x67}) is present. */
    public boolean hasPrefix(int prefix) {
        return (legacyPrefixes & prefixBit(prefix)) != 0;
    }

    /** First opcode byte. */
    public int first() {
        return opcode[0];
    }

    /** True for a one-byte opcode equal to {@code op}. */
    public boolean isOneByte(int op) {
        return opcode.length == 1 && opcode[0] == op;
    }

    /** True for a two-byte {@code 0f xx} opcode with {@code xx == op}. */
    public boolean isTwoByte(int op) {
        return opcode.length == 2 && opcode[1] == op;
    }

    /** Opcode byte {@code k} (0: the first; after a {@code 0f} escape, 1: the byte after it). */
    public int opcodeByte(int k) {
        return opcode[k];
    }

    /** Opcode length in bytes. */
    public int length() {
        return opcode.length;
    }

    /** ModRM.mod (bits 7–6), or -1 without a byte after the opcode. */
    public int mod() {
        return modrm < 0 ? -1 : modrm >> 6;
    }

    /** ModRM.reg (bits 5–3): the opcode extension of group opcodes such as {@code ff /2}. */
    public int reg() {
        return modrm < 0 ? -1 : (modrm >> 3) & 7;
    }

    private static int prefixBit(int b) {
        for (int k = 0; k < LEGACY_PREFIXES.length; k++) if (LEGACY_PREFIXES[k] == b) return 1 << k;
        return 0;
    }

    private static int u8(byte[] b, int i) {
        return b[i] & 0xff;
    }
}
