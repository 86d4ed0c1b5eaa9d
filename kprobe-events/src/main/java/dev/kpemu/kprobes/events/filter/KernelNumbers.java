package dev.kpemu.kprobes.events.filter;

import java.math.BigInteger;

/** {@code kstrtoull} / {@code kstrtoll} with base 0: {@code 0x} hex, leading {@code 0} octal, else decimal; the whole text, no overflow. */
final class KernelNumbers {
    private KernelNumbers() {}

    private static final BigInteger U64_MAX = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);

    /** The value as 64 bits, or null when the kernel refuses the text. */
    static Long strtoull(String s) {
        if (s.startsWith("+")) s = s.substring(1);
        BigInteger v = unsigned(s);
        return v == null || v.compareTo(U64_MAX) > 0 ? null : v.longValue();
    }

    static Long strtoll(String s) {
        boolean neg = s.startsWith("-");
        BigInteger v = unsigned(neg ? s.substring(1) : s.startsWith("+") ? s.substring(1) : s);
        if (v == null) return null;
        if (neg) {
            if (v.compareTo(BigInteger.ONE.shiftLeft(63)) > 0) return null;
            return v.negate().longValue();
        }
        return v.compareTo(BigInteger.ONE.shiftLeft(63).subtract(BigInteger.ONE)) > 0 ? null : v.longValue();
    }

    private static BigInteger unsigned(String s) {
        int radix = 10;
        if (s.length() > 2 && s.charAt(0) == '0' && (s.charAt(1) == 'x' || s.charAt(1) == 'X')) {
            radix = 16;
            s = s.substring(2);
        } else if (s.length() > 1 && s.charAt(0) == '0') {
            radix = 8;
            s = s.substring(1);
        }
        if (s.isEmpty()) return null;
        for (int k = 0; k < s.length(); k++) if (Character.digit(s.charAt(k), radix) < 0) return null;
        return new BigInteger(s, radix);
    }
}
