package dev.kpemu.kprobes.events;

import java.util.Arrays;

/**
 * A trace line (or several) as the guest's bytes, built in place: what {@code trace} shows is
 * bytes, and a writer of many lines formats each straight into them, with no string, no char
 * array and no encoding step per line. Text from {@link GuestText#decode} goes back to its bytes
 * ({@link #text}); numbers are written as {@link Long#toString}, {@link Long#toUnsignedString}
 * and {@link Long#toHexString} write them. Not thread-safe.
 */
public final class LineBytes {
    private byte[] a;
    private int n;

    public LineBytes(int capacity) { a = new byte[Math.max(16, capacity)]; }

    /** The bytes so far: {@code array()[0..length())}. */
    public byte[] array() { return a; }

    public int length() { return n; }

    /** Empties the line (the array is kept). */
    public LineBytes clear() {
        n = 0;
        return this;
    }

    private void room(int more) {
        if (n + more > a.length) a = Arrays.copyOf(a, Math.max(n + more, 2 * a.length));
    }

    /** One ASCII character ({@code c < 0x80}). */
    public LineBytes ascii(char c) { return raw(c); }

    /** One byte as it is (a {@code char} value from the guest). */
    public LineBytes raw(int b) {
        if (n == a.length) room(1);
        a[n++] = (byte) b;
        return this;
    }

    /** {@code s} as the guest's bytes: ASCII a byte a char, anything else as {@link GuestText#encode} (escapes included). */
    public LineBytes text(String s) {
        int len = s.length();
        room(len);
        byte[] b = a;
        int at = n;
        for (int i = 0; i < len; i++) {
            char c = s.charAt(i);
            if (c >= 0x80) return bytes(GuestText.encode(s.substring(i)));   // n not yet moved past the ASCII prefix
            b[at + i] = (byte) c;
            n = at + i + 1;
        }
        return this;
    }

    public LineBytes bytes(byte[] b) { return bytes(b, 0, b.length); }

    public LineBytes bytes(byte[] b, int off, int len) {
        room(len);
        System.arraycopy(b, off, a, n, len);
        n += len;
        return this;
    }

    /** {@code count} copies of the ASCII character {@code c} (none when {@code count} is not positive). */
    public LineBytes fill(char c, int count) {
        if (count <= 0) return this;
        room(count);
        Arrays.fill(a, n, n + count, (byte) c);
        n += count;
        return this;
    }

    /** {@code v} in decimal, as {@link Long#toString(long)}. */
    public LineBytes decimal(long v) {
        if (v < 0) {
            if (v == Long.MIN_VALUE) return text("-9223372036854775808");
            ascii('-');
            v = -v;
        }
        return unsigned(v);
    }

    /** {@code v} in decimal, unsigned, as {@link Long#toUnsignedString(long)}. */
    public LineBytes unsigned(long v) {
        if (v < 0) {                      // above Long.MAX_VALUE: the leading digits, then the last
            long q = Long.divideUnsigned(v, 10);
            unsigned(q);
            return ascii((char) ('0' + (v - q * 10)));
        }
        int digits = digits(v);
        room(digits);
        int end = n + digits, i = end;
        while (v > Integer.MAX_VALUE) {   // the client compiler divides a long in a runtime call: int digits in ints
            long q = v / 10;
            a[--i] = (byte) ('0' + (int) (v - q * 10));
            v = q;
        }
        for (int x = (int) v; i > n; ) {
            int q = x / 10;
            a[--i] = (byte) ('0' + (x - q * 10));
            x = q;
        }
        n = end;
        return this;
    }

    /** The decimal digits of {@code v}, which is not negative. */
    public static int digits(long v) {
        if (v < 1_000_000_000L) {
            int x = (int) v;
            return x < 10 ? 1 : x < 100 ? 2 : x < 1000 ? 3 : x < 10_000 ? 4 : x < 100_000 ? 5 : x < 1_000_000 ? 6
                    : x < 10_000_000 ? 7 : x < 100_000_000 ? 8 : 9;
        }
        int d = 10;
        for (long p = 10_000_000_000L; d < 19 && v >= p; p *= 10) d++;
        return d;
    }

    private static final byte[] HEX = "0123456789abcdef".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    /** {@code v} as {@link Long#toHexString} writes it (lower case, unsigned, no leading zeros). */
    public LineBytes hex(long v) {
        int shift = 60;
        while (shift > 0 && (v >>> shift) == 0) shift -= 4;
        room(shift / 4 + 1);
        for (; shift >= 0; shift -= 4) a[n++] = HEX[(int) (v >>> shift) & 0xf];
        return this;
    }

    /** A copy of the bytes. */
    public byte[] toByteArray() { return Arrays.copyOf(a, n); }

    /** The bytes as text ({@link GuestText#decode}: lossless). */
    public String toText() { return GuestText.decode(a, 0, n); }

    @Override
    public String toString() { return toText(); }
}
