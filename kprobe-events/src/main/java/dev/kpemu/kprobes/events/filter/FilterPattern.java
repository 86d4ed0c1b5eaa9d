package dev.kpemu.kprobes.events.filter;

import dev.kpemu.kprobes.events.GuestText;

/**
 * A string predicate's pattern as ftrace matches it ({@code filter_build_regex}): {@code ==} and
 * {@code !=} compare the whole string; {@code ~} reads the pattern as {@code filter_parse_regex}
 * does — a leading {@code !} inverts, {@code *x} matches the end, {@code x*} the front,
 * {@code *x*} anywhere, and any other {@code *}, {@code ?}, {@code [} or {@code \} makes it a
 * glob ({@code glob_match}). Pattern and string are compared as the kernel's bytes: both are held
 * as {@link GuestText#byteString} (one char per byte).
 */
final class FilterPattern {
    enum Type { FULL, FRONT, MIDDLE, END, GLOB }

    final Type type;
    final String pattern;
    final boolean not;

    private FilterPattern(Type type, String pattern, boolean not) {
        this.type = type;
        this.pattern = pattern;
        this.not = not;
    }

    static FilterPattern exact(String s) { return new FilterPattern(Type.FULL, GuestText.byteString(s), false); }

    /** {@code filter_parse_regex} for {@code ~}. */
    static FilterPattern glob(String s) {
        s = GuestText.byteString(s);
        boolean not = false;
        if (!s.isEmpty() && s.charAt(0) == '!') {
            not = true;
            s = s.substring(1);
        }
        Type type = Type.FULL;
        int len = s.length();
        for (int i = 0; i < len; i++) {
            char c = s.charAt(i);
            if (c == '*') {
                if (i == 0) {
                    type = Type.END;
                } else if (i == len - 1) {
                    type = type == Type.END ? Type.MIDDLE : Type.FRONT;
                    s = s.substring(0, i);
                    break;
                } else {
                    return new FilterPattern(Type.GLOB, s, not);
                }
            } else if (c == '[' || c == '?' || c == '\\') {
                return new FilterPattern(Type.GLOB, s, not);
            }
        }
        if (!s.isEmpty() && s.charAt(0) == '*') s = s.substring(1);
        return new FilterPattern(type, s, not);
    }

    /** Whether the field's string matches, byte by byte as the kernel compares ({@code ?} is one byte). */
    boolean matches(String field) {
        String str = GuestText.byteString(field);
        return switch (type) {
            case FULL -> str.equals(pattern);
            case FRONT -> str.startsWith(pattern);
            case MIDDLE -> str.contains(pattern);
            case END -> str.endsWith(pattern);
            case GLOB -> globMatch(pattern, 0, str, 0);
        };
    }

    /** {@code glob_match}: {@code *}, {@code ?}, {@code [...]} with ranges and {@code !}/{@code ^} negation, {@code \} escapes. */
    static boolean globMatch(String pat, int p, String str, int s) {
        while (p < pat.length()) {
            char c = pat.charAt(p);
            if (c == '*') {
                while (p < pat.length() && pat.charAt(p) == '*') p++;
                if (p == pat.length()) return true;
                for (int k = s; k <= str.length(); k++) if (globMatch(pat, p, str, k)) return true;
                return false;
            }
            if (s >= str.length()) return false;
            char d = str.charAt(s);
            if (c == '?') {
                p++;
                s++;
                continue;
            }
            if (c == '[') {
                int q = p + 1;
                boolean negate = q < pat.length() && (pat.charAt(q) == '!' || pat.charAt(q) == '^');
                if (negate) q++;
                boolean match = false;
                boolean first = true;
                while (q < pat.length() && (first || pat.charAt(q) != ']')) {
                    first = false;
                    char lo = pat.charAt(q), hi = lo;
                    if (q + 2 < pat.length() && pat.charAt(q + 1) == '-' && pat.charAt(q + 2) != ']') {
                        hi = pat.charAt(q + 2);
                        q += 2;
                    }
                    if (lo <= d && d <= hi) match = true;
                    q++;
                }
                if (q >= pat.length()) {   // no closing ']': a literal '['
                    if (d != '[') return false;
                    p++;
                    s++;
                    continue;
                }
                if (match == negate) return false;
                p = q + 1;
                s++;
                continue;
            }
            if (c == '\\' && p + 1 < pat.length()) c = pat.charAt(++p);
            if (c != d) return false;
            p++;
            s++;
        }
        return s == str.length();
    }
}
