package dev.kpemu.kprobes.events;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * kpemu's extension for probing many functions with one definition, as bpftrace's
 * {@code kprobe:tcp_*} and perf probe's function lists do: a glob in the probed symbol,
 * {@code p:tcp/ tcp_*} or {@code r:vfs/ vfs_* ret=$retval} ({@code *}, {@code ?} and
 * {@code [...]} as in a shell). Linux's kprobe_events has no such thing, and a kernel symbol never
 * contains those characters, so single-probe definitions are untouched.
 *
 * <p>A glob definition names no event: each probe gets the name Linux gives a probe written
 * without one ({@code p_<function>_<offset>}, {@code r_<function>_<offset>} for a return probe),
 * in the group given ({@code kprobes} if none). It matches the kernel's function symbols (text,
 * {@code t}/{@code T}) whose name appears once and has no {@code .} suffix (compiler clones such as
 * {@code .cold} and {@code .isra.0} are parts of functions). An offset or {@code %return} after the
 * glob applies to every match; the fetch arguments are copied to each.
 */
public final class ProbeGlob {
    /** One symbol of the kernel: its name and whether it is a function (text). */
    public record Symbol(String name, boolean text) {}

    /** The expansion of one glob definition. */
    public record Expansion(String definition, List<String> definitions, List<String> matched) {}

    private static final Pattern HEAD = Pattern.compile("([pr])(\\d*)(?::(?:([^/\\s]*)/)?([^\\s/]*))?");

    private ProbeGlob() {}

    /** True when {@code definition} probes a glob (its symbol holds {@code *}, {@code ?} or {@code [}). */
    public static boolean isGlob(String definition) {
        String[] t = definition.strip().split("\\s+", 3);
        if (t.length < 2 || t[0].isEmpty() || (t[0].charAt(0) != 'p' && t[0].charAt(0) != 'r')) return false;
        String target = symbolPart(t[1]);
        return target.indexOf('*') >= 0 || target.indexOf('?') >= 0 || target.indexOf('[') >= 0;
    }

    private static String symbolPart(String target) {
        int cut = target.length();
        for (char c : new char[] {'+', '%'}) {
            int i = target.indexOf(c);
            if (i >= 0 && i < cut) cut = i;
        }
        return target.substring(0, cut);
    }

    /**
     * Expands a glob definition over {@code symbols} into one kprobe_events definition per
     * matching function, in symbol order. Throws {@link IllegalArgumentException} with a one-line
     * reason when the definition names an event (each probe is named after its function) or the
     * glob is malformed.
     */
    public static Expansion expand(String definition, List<Symbol> symbols) {
        String[] t = definition.strip().split("\\s+", 3);
        Matcher h = HEAD.matcher(t[0]);
        if (!h.matches()) throw new IllegalArgumentException("not a probe definition: " + t[0]);
        String kind = h.group(1), maxactive = h.group(2), group = h.group(3), event = h.group(4);
        if (event != null && !event.isEmpty()) {
            throw new IllegalArgumentException("a glob probe names no event (each probe is named after its function, as Linux names a probe"
                    + " without one): write '" + kind + maxactive + ":" + (group != null ? group : event) + "/ " + t[1] + "'");
        }
        String target = t[1];
        String glob = symbolPart(target), suffix = target.substring(glob.length());
        boolean isReturn = kind.equals("r") || suffix.equals("%return");
        long offset = 0;
        if (suffix.startsWith("+")) {
            try {
                offset = Long.decode(suffix.substring(1));
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("bad offset in " + target);
            }
        }
        Pattern p = Pattern.compile(regex(glob));
        Map<String, Integer> counts = new HashMap<>();
        for (Symbol s : symbols) counts.merge(s.name(), 1, Integer::sum);
        Map<String, Boolean> seen = new LinkedHashMap<>();
        for (Symbol s : symbols) {
            if (!s.text() || s.name().indexOf('.') >= 0 || counts.get(s.name()) != 1) continue;
            if (p.matcher(s.name()).matches()) seen.putIfAbsent(s.name(), true);
        }
        List<String> out = new ArrayList<>(), matched = new ArrayList<>(seen.keySet());
        String rest = t.length > 2 ? " " + t[2] : "";
        String grp = group != null && !group.isEmpty() ? group : "kprobes";
        for (String name : matched) {
            String auto = (isReturn ? "r" : "p") + "_" + name + "_" + offset;
            out.add(kind + maxactive + ":" + grp + "/" + auto + " " + name + suffix + rest);
        }
        return new Expansion(definition, out, matched);
    }

    /** The names a glob matches ({@code *}, {@code ?}, {@code [...]}; a plain name matches itself), as a pattern. */
    public static Pattern pattern(String glob) { return Pattern.compile(regex(glob)); }

    /** A shell glob as a regular expression: {@code *}, {@code ?}, {@code [...]} (with {@code !} or {@code ^} to negate). */
    static String regex(String glob) {
        StringBuilder r = new StringBuilder();
        for (int i = 0; i < glob.length(); i++) {
            char c = glob.charAt(i);
            switch (c) {
                case '*' -> r.append("[^.]*");
                case '?' -> r.append("[^.]");
                case '[' -> {
                    int end = glob.indexOf(']', i + 2);
                    if (end < 0) throw new IllegalArgumentException("unclosed [ in glob " + glob);
                    String set = glob.substring(i + 1, end);
                    if (set.startsWith("!")) set = "^" + set.substring(1);
                    r.append('[').append(set.replace("\\", "\\\\")).append(']');
                    i = end;
                }
                default -> r.append(Pattern.quote(String.valueOf(c)));
            }
        }
        return r.toString();
    }
}
