package dev.kpemu.kprobes.events;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Kernel string helpers on "byte strings": Java strings whose every char is one byte
 * (0..255) of the UTF-8 text the user wrote, so lengths and offsets count bytes like the
 * kernel. Character classes follow the kernel's Latin-1 {@code _ctype} table.
 */
final class Bytes {
    private Bytes() {}

    static String encode(String s) {
        return new String(s.getBytes(StandardCharsets.UTF_8), StandardCharsets.ISO_8859_1);
    }

    static String decode(String b) {
        return new String(b.getBytes(StandardCharsets.ISO_8859_1), StandardCharsets.UTF_8);
    }

    static boolean isSpace(char c) {
        return c == ' ' || (c >= 9 && c <= 13) || c == 0xA0;
    }

    static boolean isDigit(char c) { return c >= '0' && c <= '9'; }

    static boolean isXDigit(char c) {
        return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    }

    /** Kernel {@code isalpha}: ASCII letters plus the Latin-1 letters of {@code _ctype}. */
    static boolean isAlpha(char c) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
        return c >= 192 && c <= 255 && c != 215 && c != 247;
    }

    /** {@code is_good_name}: a C identifier (with the kernel's notion of letters). */
    static boolean isGoodName(String s) {
        if (s.isEmpty()) return false;
        char c = s.charAt(0);
        if (!isAlpha(c) && c != '_') return false;
        for (int i = 1; i < s.length(); i++) {
            c = s.charAt(i);
            if (!isAlpha(c) && !isDigit(c) && c != '_') return false;
        }
        return true;
    }

    /** {@code is_good_system_name} (mainline): like a C identifier but '-' allowed after the first char. */
    static boolean isGoodSystemName(String s) {
        if (s.isEmpty()) return false;
        char c = s.charAt(0);
        if (!isAlpha(c) && c != '_') return false;
        for (int i = 1; i < s.length(); i++) {
            c = s.charAt(i);
            if (!isAlpha(c) && !isDigit(c) && c != '_' && c != '-') return false;
        }
        return true;
    }

    /** {@code argv_split}: whitespace-separated tokens, no quoting. */
    static List<String> argvSplit(String s) {
        List<String> out = new ArrayList<>();
        int i = 0, n = s.length();
        while (i < n) {
            while (i < n && isSpace(s.charAt(i))) i++;
            if (i >= n) break;
            int start = i;
            while (i < n && !isSpace(s.charAt(i))) i++;
            out.add(s.substring(start, i));
        }
        return out;
    }

    // ---- lib/kstrtox.c ------------------------------------------------------------------

    private static int digitValue(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return 16;
    }

    /** {@code _parse_integer_fixup_radix}: returns {base, prefix length}. */
    private static int[] fixupRadix(String s, int from, int base) {
        char c0 = charAt(s, from), c1 = charAt(s, from + 1), c2 = charAt(s, from + 2);
        if (base == 0) {
            if (c0 == '0') base = (Character.toLowerCase(c1) == 'x' && isXDigit(c2)) ? 16 : 8;
            else base = 10;
        }
        int skip = (base == 16 && c0 == '0' && Character.toLowerCase(c1) == 'x') ? 2 : 0;
        return new int[] {base, skip};
    }

    static char charAt(String s, int i) { return i < s.length() ? s.charAt(i) : '\0'; }

    /** {@code _kstrtoull}; null on -EINVAL/-ERANGE. */
    private static Long parseUll(String s, int from, int base) {
        int[] fr = fixupRadix(s, from, base);
        base = fr[0];
        int i = from + fr[1];
        long res = 0;
        int count = 0;
        boolean overflow = false;
        while (i < s.length()) {
            int v = digitValue(s.charAt(i));
            if (v >= base) break;
            // overflow if res * base + v > 2^64-1
            if (Long.compareUnsigned(res, Long.divideUnsigned(-1L - v, base)) > 0) overflow = true;
            res = res * base + v;
            i++;
            count++;
        }
        if (overflow) return null;
        if (count == 0) return null;
        if (i < s.length() && s.charAt(i) == '\n') i++;
        if (i < s.length()) return null;
        return res;
    }

    /** {@code kstrtoull} (also {@code kstrtoul} on 64-bit): optional leading '+'. */
    static Long kstrtoull(String s, int base) {
        int from = (!s.isEmpty() && s.charAt(0) == '+') ? 1 : 0;
        return parseUll(s, from, base);
    }

    /**
     * Whether {@code kstrtoull} refuses {@code s} only because its value passes 2^64-1: the
     * kernel then returns ERANGE rather than EINVAL.
     */
    static boolean kstrtoullOverflows(String s, int base) {
        int from = (!s.isEmpty() && s.charAt(0) == '+') ? 1 : 0;
        if (parseUll(s, from, base) != null) return false;
        int[] fr = fixupRadix(s, from, base);
        int i = from + fr[1], count = 0;
        while (i < s.length() && digitValue(s.charAt(i)) < fr[0]) { i++; count++; }
        if (i < s.length() && s.charAt(i) == '\n') i++;
        return count > 0 && i == s.length();
    }

    /** {@code kstrtouint}. */
    static Long kstrtouint(String s, int base) {
        Long v = kstrtoull(s, base);
        if (v == null || Long.compareUnsigned(v, 0xFFFF_FFFFL) > 0) return null;
        return v;
    }

    /** {@code kstrtoll} (also {@code kstrtol} on 64-bit). */
    static Long kstrtoll(String s, int base) {
        if (!s.isEmpty() && s.charAt(0) == '-') {
            Long t = parseUll(s, 1, base);
            if (t == null) return null;
            long neg = -t;
            if (neg > 0) return null;
            return neg;
        }
        Long t = kstrtoull(s, base);
        if (t == null || t < 0) return null;
        return t;
    }

    /**
     * {@code simple_strtoull(s + from, &end, 0)}: returns {value, end index}; never fails,
     * wraps on overflow like the kernel.
     */
    static long[] simpleStrtoull(String s, int from) {
        int[] fr = fixupRadix(s, from, 0);
        int base = fr[0];
        int i = from + fr[1];
        long res = 0;
        while (i < s.length()) {
            int v = digitValue(s.charAt(i));
            if (v >= base) break;
            res = res * base + v;
            i++;
        }
        return new long[] {res, i};
    }
}
