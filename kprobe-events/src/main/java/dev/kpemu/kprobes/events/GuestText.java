package dev.kpemu.kprobes.events;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.Charset;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CharsetEncoder;
import java.nio.charset.CoderResult;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

/**
 * Guest bytes in Java strings, losslessly: the one place that says how kpemu carries text that
 * came out of the guest ({@code :string}/{@code :ustring}/{@code :symstr} fetches, {@code $comm},
 * {@code :char}) and how every output turns it back into the guest's bytes (issue 32).
 *
 * <p>Linux's {@code trace} prints those bytes as they are, whatever they are; most are UTF-8, some
 * are not (a file name is any bytes but '/' and NUL). The mapping is UTF-8 with
 * <em>surrogateescape</em> (PEP 383): every well-formed UTF-8 sequence (RFC 3629: no overlong
 * forms, no encoded surrogates, nothing above U+10FFFF) decodes to its character, and every byte
 * that does not begin one decodes to the lone surrogate {@code U+DC00 + byte}, i.e. U+DC80..U+DCFF
 * (such a byte is always 0x80 or above). Well-formed UTF-8 never produces a lone surrogate, so
 * {@link #encode} gives back exactly the bytes {@link #decode} was given: the bytes of an
 * encoded surrogate ({@code ED B2 80}) are three escapes, not U+DC80. Concatenating decoded text
 * with ASCII (the trace line around a value) keeps that property, since no ASCII byte continues a
 * UTF-8 sequence.
 *
 * <p>Every output encodes with {@link #encode} or {@link #CHARSET}: the text trace (stdout,
 * {@code -o}), {@code --record} files, and the files read back (goldens, Linux's recorded
 * references) decode with {@link #decode}, so a comparison compares the bytes. Outputs that must
 * be valid Unicode (JSON, Perfetto) show {@link #displayable} text (U+FFFD for each escaped byte)
 * and carry the bytes beside it, {@link #base64} (docs/json-trace.md). Strings that never came
 * from {@link #decode} and hold other lone surrogates encode them as {@code '?'}, as Java's UTF-8
 * encoder does.
 */
public final class GuestText {
    private GuestText() {}

    private static final char ESCAPE_BASE = 0xDC00;

    /**
     * UTF-8 with surrogateescape as a {@link Charset}, for writers ({@code PrintStream},
     * {@code Writer}) of text trace lines: its encoder is {@link #encode}'s. Its decoder is
     * {@link #decode}'s except where the input ends inside a multi-byte sequence (a stream decoder
     * cannot see its end); readers of kpemu's files therefore read bytes and call {@link #decode},
     * or read lines as ISO-8859-1 and call {@link #fromLatin1}.
     */
    public static final Charset CHARSET = new SurrogateEscapeCharset();

    /** {@code len} bytes of {@code b} from {@code off} as text, losslessly. */
    public static String decode(byte[] b, int off, int len) {
        StringBuilder sb = null;
        int end = off + len;
        for (int i = off; i < end; ) {
            int n = sequenceLength(b, i, end);
            if (n > 0) {
                if (sb != null) sb.append(new String(b, i, n, StandardCharsets.UTF_8));
                i += n;
            } else {
                if (sb == null) sb = new StringBuilder(len + 8).append(new String(b, off, i - off, StandardCharsets.UTF_8));
                sb.append(escape(b[i]));
                i++;
            }
        }
        return sb == null ? new String(b, off, len, StandardCharsets.UTF_8) : sb.toString();
    }

    /** All of {@code b} as text, losslessly. */
    public static String decode(byte[] b) { return decode(b, 0, b.length); }

    /** A line read byte per char (ISO-8859-1) as text: {@code decode(line's bytes)}. */
    public static String fromLatin1(String latin1) { return decode(latin1.getBytes(StandardCharsets.ISO_8859_1)); }

    /** The guest's bytes of {@code s}: UTF-8, each escape U+DC80..U+DCFF its byte. */
    public static byte[] encode(CharSequence s) {
        ByteBuffer out = ByteBuffer.allocate(s.length() * 3);
        encodeInto(CharBuffer.wrap(s), out, true);
        return java.util.Arrays.copyOf(out.array(), out.position());
    }

    /**
     * {@code s}'s guest bytes one char each (ISO-8859-1), for code that works on bytes as the
     * kernel does (filters' {@code glob_match}); {@code s} itself when it is ASCII.
     */
    public static String byteString(String s) {
        for (int i = 0; i < s.length(); i++)
            if (s.charAt(i) >= 0x80) return new String(encode(s), StandardCharsets.ISO_8859_1);
        return s;
    }

    /** The text of one byte as a value of type {@code char} prints it: the byte itself. */
    public static String ofByte(int b) {
        b &= 0xff;
        return b < 0x80 ? String.valueOf((char) b) : String.valueOf(escape((byte) b));
    }

    /** Whether {@code s} holds a byte that is not UTF-8 (an escape). */
    public static boolean hasRawBytes(CharSequence s) {
        for (int i = 0; i < s.length(); i++) if (isEscape(s.charAt(i))) return true;
        return false;
    }

    /** {@code s} as valid Unicode for a reader: each escaped byte U+FFFD, as a lenient UTF-8 decoder shows it. */
    public static String displayable(String s) {
        if (!hasRawBytes(s)) return s;
        StringBuilder sb = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            sb.append(isEscape(c) ? '\uFFFD' : c);
        }
        return sb.toString();
    }

    /** The guest bytes of {@code s} in base64 (RFC 4648, padded), the JSON outputs' lossless copy. */
    public static String base64(String s) { return Base64.getEncoder().encodeToString(encode(s)); }

    /** The byte an escape stands for, or -1 for any other char. */
    public static int rawByte(char c) { return isEscape(c) ? c - ESCAPE_BASE : -1; }

    private static boolean isEscape(char c) { return c >= 0xDC80 && c <= 0xDCFF; }

    private static char escape(byte b) { return (char) (ESCAPE_BASE + (b & 0xff)); }

    /**
     * The length of the well-formed UTF-8 sequence at {@code i} (RFC 3629's table), 0 when none
     * starts there (an invalid byte, or a sequence cut by {@code end}).
     */
    static int sequenceLength(byte[] b, int i, int end) {
        int c = b[i] & 0xff;
        if (c < 0x80) return 1;
        int n, lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) n = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            if (c == 0xE0) lo = 0xA0;
            else if (c == 0xED) hi = 0x9F;   // no encoded surrogates
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            if (c == 0xF0) lo = 0x90;
            else if (c == 0xF4) hi = 0x8F;
        } else return 0;
        if (i + n > end) return 0;
        int c1 = b[i + 1] & 0xff;
        if (c1 < lo || c1 > hi) return 0;
        for (int k = 2; k < n; k++) if ((b[i + k] & 0xc0) != 0x80) return 0;
        return n;
    }

    /** Encodes what {@code in} holds into {@code out}; a high surrogate at the end waits for more unless {@code end}. */
    private static CoderResult encodeInto(CharBuffer in, ByteBuffer out, boolean end) {
        while (in.hasRemaining()) {
            copyAscii(in, out);
            if (!in.hasRemaining()) break;
            char c = in.get(in.position());
            int need, cp = c;
            boolean pair = false;
            if (c < 0x80) need = 1;
            else if (c < 0x800) need = 2;
            else if (isEscape(c)) need = 1;
            else if (Character.isHighSurrogate(c)) {
                if (in.remaining() < 2) {
                    if (!end) return CoderResult.UNDERFLOW;
                    need = 1;
                    cp = '?';
                } else if (Character.isLowSurrogate(in.get(in.position() + 1))) {
                    cp = Character.toCodePoint(c, in.get(in.position() + 1));
                    need = 4;
                    pair = true;
                } else {
                    need = 1;
                    cp = '?';
                }
            } else if (Character.isSurrogate(c)) {
                need = 1;
                cp = '?';
            } else need = 3;
            if (out.remaining() < need) return CoderResult.OVERFLOW;
            in.position(in.position() + (pair ? 2 : 1));
            if (isEscape(c)) {
                out.put((byte) (c - ESCAPE_BASE));
            } else if (need == 1) {
                out.put((byte) cp);
            } else if (need == 2) {
                out.put((byte) (0xC0 | (cp >> 6))).put((byte) (0x80 | (cp & 0x3F)));
            } else if (need == 3) {
                out.put((byte) (0xE0 | (cp >> 12))).put((byte) (0x80 | ((cp >> 6) & 0x3F))).put((byte) (0x80 | (cp & 0x3F)));
            } else {
                out.put((byte) (0xF0 | (cp >> 18))).put((byte) (0x80 | ((cp >> 12) & 0x3F)))
                        .put((byte) (0x80 | ((cp >> 6) & 0x3F))).put((byte) (0x80 | (cp & 0x3F)));
            }
        }
        return CoderResult.UNDERFLOW;
    }

    /**
     * The run of ASCII chars at {@code in}'s position, one byte each, array to array: a trace line
     * is nearly all ASCII, and the writer's encoder spent most of its time in the per-char buffer
     * calls of {@link #encodeInto}'s general loop (which gives the same bytes for them). Stops at
     * the first other char or when {@code out} is full.
     */
    private static void copyAscii(CharBuffer in, ByteBuffer out) {
        if (!in.hasArray() || !out.hasArray()) return;
        char[] src = in.array();
        byte[] dst = out.array();
        int si = in.arrayOffset() + in.position(), sEnd = in.arrayOffset() + in.limit();
        int di = out.arrayOffset() + out.position(), n = Math.min(sEnd - si, out.remaining()), start = si;
        for (int limit = si + n; si < limit; si++, di++) {
            char c = src[si];
            if (c >= 0x80) break;
            dst[di] = (byte) c;
        }
        int copied = si - start;
        in.position(in.position() + copied);
        out.position(out.position() + copied);
    }

    private static final class SurrogateEscapeCharset extends Charset {
        SurrogateEscapeCharset() { super("X-kpemu-UTF-8-surrogateescape", new String[0]); }

        @Override public boolean contains(Charset cs) { return cs == this || StandardCharsets.UTF_8.contains(cs); }

        @Override public CharsetDecoder newDecoder() {
            return new CharsetDecoder(this, 1.0f, 1.0f) {
                @Override protected CoderResult decodeLoop(ByteBuffer in, CharBuffer out) {
                    byte[] one = new byte[4];
                    while (in.hasRemaining()) {
                        int p = in.position(), avail = Math.min(4, in.remaining());
                        for (int k = 0; k < avail; k++) one[k] = in.get(p + k);
                        int n = sequenceLength(one, 0, avail);
                        if (n == 0 && avail < 4 && isPrefix(one, avail)) return CoderResult.UNDERFLOW;
                        String s = n > 0 ? new String(one, 0, n, StandardCharsets.UTF_8) : String.valueOf(escape(one[0]));
                        if (out.remaining() < s.length()) return CoderResult.OVERFLOW;
                        out.put(s);
                        in.position(p + Math.max(n, 1));
                    }
                    return CoderResult.UNDERFLOW;
                }
            };
        }

        @Override public CharsetEncoder newEncoder() {
            return new CharsetEncoder(this, 1.1f, 4.0f, new byte[] {'?'}) {
                @Override protected CoderResult encodeLoop(CharBuffer in, ByteBuffer out) {
                    return encodeInto(in, out, false);
                }

                @Override protected CoderResult implFlush(ByteBuffer out) { return CoderResult.UNDERFLOW; }

                @Override public boolean canEncode(char c) { return !Character.isSurrogate(c) || isEscape(c); }
            };
        }

        /** Whether the {@code n} bytes could begin a well-formed sequence that more bytes complete. */
        private static boolean isPrefix(byte[] b, int n) {
            byte[] padded = java.util.Arrays.copyOf(b, 4);
            int c = b[0] & 0xff;
            int need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
            if (need <= n) return false;
            // complete the sequence with the smallest continuation bytes that could follow
            for (int k = n; k < need; k++) padded[k] = (byte) (c == 0xE0 && k == 1 ? 0xA0 : c == 0xF0 && k == 1 ? 0x90 : 0x80);
            return sequenceLength(padded, 0, need) == need;
        }
    }
}
