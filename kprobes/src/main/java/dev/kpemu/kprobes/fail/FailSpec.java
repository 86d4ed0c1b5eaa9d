package dev.kpemu.kprobes.fail;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.StringJoiner;

/**
 * One {@code --fail 'FUNC=RETVAL[,nth=N][,times=N][,interval=N][,probability=P][,space=N][,comm=NAME][,pid=N][,tree=PID[,after=exec]][,caller=SYM][,verbose=0|1|2]'}.
 * RETVAL is decimal, hex ({@code 0x…}, {@code -0x…}) or an errno name, {@code -ENOMEM}
 * (negated) or {@code ENOMEM}. {@link #parse} throws IllegalArgumentException with a one-line
 * message naming the bad part.
 */
public record FailSpec(String function, long retval, Map<String, String> options) {
    private static final java.util.Set<String> KEYS =
            java.util.Set.of("nth", "times", "interval", "probability", "space", "comm", "pid", "tree", "after", "caller", "verbose");

    public static FailSpec parse(String spec) {
        int eq = spec.indexOf('=');
        if (eq <= 0) throw new IllegalArgumentException("--fail '" + spec + "': expected FUNC=RETVAL[,key=value...]");
        String function = spec.substring(0, eq);
        if (!function.matches("[A-Za-z_][A-Za-z0-9_.$]*"))
            throw new IllegalArgumentException("--fail '" + spec + "': '" + function + "' is not a function name");
        String[] parts = spec.substring(eq + 1).split(",", -1);
        long retval = parseRetval(spec, parts[0]);
        Map<String, String> options = new LinkedHashMap<>();
        for (int i = 1; i < parts.length; i++) {
            String p = parts[i];
            int e = p.indexOf('=');
            String key = e < 0 ? p : p.substring(0, e);
            if (!KEYS.contains(key)) throw new IllegalArgumentException("--fail '" + spec + "': unknown option '" + key + "' (known: " + String.join(", ", new java.util.TreeSet<>(KEYS)) + ")");
            if (e < 0 || e == p.length() - 1) throw new IllegalArgumentException("--fail '" + spec + "': option '" + key + "' needs a value");
            if (options.put(key, p.substring(e + 1)) != null) throw new IllegalArgumentException("--fail '" + spec + "': option '" + key + "' given twice");
        }
        FailSpec s = new FailSpec(function, retval, java.util.Collections.unmodifiableMap(options));
        s.attr(FaultAttr.DEFAULT_SEED); // checks the values
        return s;
    }

    /** The decision state for one run, its draws from {@code seed}. */
    public FaultAttr attr(long seed) {
        FaultAttr.Builder b = FaultAttr.builder().seed(seed);
        for (var e : options.entrySet()) {
            String k = e.getKey(), v = e.getValue();
            try {
                switch (k) {
                    case "nth" -> b.nth(Long.parseLong(v));
                    case "times" -> b.times(Integer.parseInt(v));
                    case "interval" -> b.interval(Long.parseLong(v));
                    case "probability" -> b.probability(Long.parseLong(v));
                    case "space" -> b.space(Integer.parseInt(v));
                    case "comm" -> b.comm(v);
                    case "pid" -> b.pid(Integer.parseInt(v));
                    case "tree" -> b.tree(Integer.parseInt(v));
                    case "after" -> {
                        if (!v.equals("exec")) throw new IllegalArgumentException("after=" + v + ": the only point is after=exec");
                        if (!options.containsKey("tree")) throw new IllegalArgumentException("after=exec needs tree=PID (whose exec it is)");
                        b.afterExec();
                    }
                    case "caller" -> b.caller(v);
                    case "verbose" -> b.verbose(Integer.parseInt(v));
                    default -> throw new IllegalStateException(k);
                }
            } catch (NumberFormatException x) {
                throw new IllegalArgumentException("--fail " + function + ": " + k + "=" + v + " is not a number");
            } catch (IllegalArgumentException x) {
                throw new IllegalArgumentException("--fail " + function + ": " + x.getMessage());
            }
        }
        return b.build();
    }

    /** The spec as {@code --fail} takes it, options in the order given. */
    public String format() {
        StringJoiner j = new StringJoiner(",");
        j.add(function + "=" + retval);
        options.forEach((k, v) -> j.add(k + "=" + v));
        return j.toString();
    }

    private static long parseRetval(String spec, String v) {
        String s = v.startsWith("-") ? v.substring(1) : v;
        long sign = v.startsWith("-") ? -1 : 1;
        try {
            if (s.startsWith("0x") || s.startsWith("0X")) return sign * Long.parseUnsignedLong(s.substring(2), 16);
            if (!s.isEmpty() && Character.isDigit(s.charAt(0))) return sign * Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--fail '" + spec + "': return value '" + v + "' is not a number");
        }
        return sign * LinuxErrno.number(s).orElseThrow(() -> new IllegalArgumentException(
                "--fail '" + spec + "': return value '" + v + "' is neither a number nor an errno name like -ENOMEM"));
    }
}
