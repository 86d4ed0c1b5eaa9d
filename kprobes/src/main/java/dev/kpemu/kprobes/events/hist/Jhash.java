package dev.kpemu.kprobes.events.hist;

/** Bob Jenkins' lookup3 hash as Linux's {@code jhash()} computes it ({@code include/linux/jhash.h}), little-endian words. */
final class Jhash {
    private Jhash() {}

    private static final int INITVAL = 0xdeadbeef;

    static int jhash(byte[] k, int length, int initval) {
        int a, b, c;
        a = b = c = INITVAL + length + initval;
        int o = 0;
        while (length > 12) {
            a += word(k, o);
            b += word(k, o + 4);
            c += word(k, o + 8);
            // __jhash_mix
            a -= c; a ^= Integer.rotateLeft(c, 4); c += b;
            b -= a; b ^= Integer.rotateLeft(a, 6); a += c;
            c -= b; c ^= Integer.rotateLeft(b, 8); b += a;
            a -= c; a ^= Integer.rotateLeft(c, 16); c += b;
            b -= a; b ^= Integer.rotateLeft(a, 19); a += c;
            c -= b; c ^= Integer.rotateLeft(b, 4); b += a;
            length -= 12;
            o += 12;
        }
        if (length == 0) return c;
        // the last block, 1..12 bytes, zero-padded
        int[] w = new int[3];
        for (int i = 0; i < length; i++) w[i / 4] |= (k[o + i] & 0xff) << (8 * (i % 4));
        a += w[0];
        b += w[1];
        c += w[2];
        // __jhash_final
        c ^= b; c -= Integer.rotateLeft(b, 14);
        a ^= c; a -= Integer.rotateLeft(c, 11);
        b ^= a; b -= Integer.rotateLeft(a, 25);
        c ^= b; c -= Integer.rotateLeft(b, 16);
        a ^= c; a -= Integer.rotateLeft(c, 4);
        b ^= a; b -= Integer.rotateLeft(a, 14);
        c ^= b; c -= Integer.rotateLeft(b, 24);
        return c;
    }

    private static int word(byte[] k, int o) {
        return (k[o] & 0xff) | (k[o + 1] & 0xff) << 8 | (k[o + 2] & 0xff) << 16 | (k[o + 3] & 0xff) << 24;
    }
}
