package dev.kpemu.kprobes.events;

import dev.kpemu.machine.Arch;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A trace recorded from Linux's own kprobe_events by {@code guest-images/record-reference.sh}
 * ({@code guest-images/reference/<arch>/<series>/<name>.trace}, one per kernel series such as
 * {@code 6.1}: {@link #read(Path, Arch, String, String)} picks the booted kernel's): the header (kernel release and Debian
 * package version it came from, the definitions) and the event lines, parsed into event name,
 * probe point, return site and arguments.
 *
 * <pre>
 * # kernel: 6.1.0-56-amd64 (package=linux-image-6.1.0-56-amd64 version=6.1.192-2 )
 * # definitions (open.x86_64.events):
 * #   p:myopen do_sys_openat2 dfd=%di fn=+0(%si):ustring
 * myopen: (do_sys_openat2+0x0/0x170) dfd=0xffffff9c fn="/init"
 * myret: (__x64_sys_openat+0x6a/0xa0 &lt;- do_sys_openat2) ret=0x3
 * </pre>
 *
 * <p>{@link #parseEvent} also reads kpemu's own lines: a full {@code trace} line (the context
 * columns are dropped), a console line with a {@code [    2.049993] } timestamp, or the bare
 * body. Argument values may contain spaces (strings): with the definitions known, each value
 * runs up to the next argument's {@code " name="}; otherwise strings are taken to their
 * closing quote.
 */
public final class ReferenceTrace {
    /** One argument of an event line. */
    public record Arg(String name, String value) {
        @Override public String toString() { return name + "=" + value; }
    }

    /**
     * One event line.
     *
     * @param name       the event name
     * @param probePoint kprobe: the probed place ({@code sym+0xoff/0xsize}); kretprobe: the return site
     * @param function   kretprobe: the probed function (after {@code <-}); kprobe: null
     * @param args       the arguments in order
     * @param body       the line from the event name on
     * @param context    the context columns (comm, pid, cpu, latency, timestamp) when the line was a
     *                   full {@code trace} line, else null (Linux's recorded references have none)
     */
    public record Event(String name, String probePoint, String function, List<Arg> args, String body, TraceContext context) {
        public Event {
            args = List.copyOf(args);
        }

        /** An event without context columns. */
        public Event(String name, String probePoint, String function, List<Arg> args, String body) {
            this(name, probePoint, function, args, body, null);
        }

        public boolean isReturn() { return function != null; }

        @Override public String toString() { return body; }
    }

    private static final Pattern TRACE_PREFIX = Pattern.compile(
            "^\\s*(.*?)-(\\d+)\\s+(?:\\(\\s*(\\d+|-------)\\)\\s+)?\\[(\\d{3})\\]\\s+(\\S{4,5})\\s+(\\d+)\\.(\\d{6}): (.*)$");
    private static final Pattern CONSOLE_PREFIX = Pattern.compile("^\\[\\s*\\d+\\.\\d+\\]\\s(.*)$");
    private static final Pattern KERNEL = Pattern.compile("^# kernel: (\\S+)(?: \\((.*)\\))?\\s*$");
    private static final Pattern DEFS = Pattern.compile("^# definitions \\((.*)\\):\\s*$");
    private static final Pattern FIELD = Pattern.compile("^# ([a-z][a-z0-9-]*): (.*)$");

    private final String source;
    private final Arch arch;
    private final String kernelRelease;
    private final String packageName;
    private final String packageVersion;
    private final List<String> definitions;
    private final Map<String, List<String>> argNames;
    private final Map<String, Boolean> returnEvents;
    private final List<Event> events;
    private final List<Map.Entry<String, String>> header;

    private ReferenceTrace(String source, Arch arch, String kernelRelease, String packageName, String packageVersion,
                           List<String> definitions, Map<String, List<String>> argNames, Map<String, Boolean> returnEvents,
                           List<Event> events, List<Map.Entry<String, String>> header) {
        this.header = List.copyOf(header);
        this.source = source;
        this.arch = arch;
        this.kernelRelease = kernelRelease;
        this.packageName = packageName;
        this.packageVersion = packageVersion;
        this.definitions = List.copyOf(definitions);
        this.argNames = argNames;
        this.returnEvents = returnEvents;
        this.events = List.copyOf(events);
    }

    /**
     * The kernel series a reference is kept for: {@code major.minor} of the release
     * ({@code 6.1.0-56-amd64} → {@code 6.1}, {@code 6.12.117+deb13-amd64} → {@code 6.12},
     * {@code 7.2.13+deb14-arm64} → {@code 7.2}). Builds of one series trace alike; within a
     * series the comparison itself ({@link TraceComparator#mode}) decides how exact it can be.
     */
    public static String series(String release) {
        Matcher m = SERIES.matcher(release == null ? "" : release);
        if (!m.lookingAt()) throw new IllegalArgumentException("not a kernel release: '" + release + "'");
        return m.group(1);
    }

    private static final Pattern SERIES = Pattern.compile("(\\d+\\.\\d+)(?=[.\\-+]|$)");

    /** {@code <referenceDir>/<arch>/<series of release>/<name>.trace}. */
    public static Path tracePath(Path referenceDir, Arch arch, String name, String release) {
        return referenceDir.resolve(arch.linuxName()).resolve(series(release)).resolve(name + ".trace");
    }

    /** {@code <referenceDir>/<name>.<arch>.events}: the definitions the trace was recorded with (every kernel's). */
    public static Path definitionsPath(Path referenceDir, Arch arch, String name) {
        return referenceDir.resolve(name + "." + arch.linuxName() + ".events");
    }

    /**
     * Reads the reference recorded for the kernel {@code release} booted:
     * {@code <referenceDir>/<arch>/<series>/<name>.trace}. None recorded for that series is a
     * {@link java.nio.file.NoSuchFileException} that says how to record one.
     */
    public static ReferenceTrace read(Path referenceDir, Arch arch, String name, String release) throws IOException {
        Path p = tracePath(referenceDir, arch, name, release);
        if (!Files.isRegularFile(p)) {
            throw new java.nio.file.NoSuchFileException(p.toString(), null, "no reference '" + name + "' recorded for kernel "
                    + series(release) + " (" + release + ") on " + arch.linuxName()
                    + "; record one with guest-images/record-reference.sh [--kernel debian:SUITE] " + arch.linuxName() + " " + name);
        }
        return read(p, arch);
    }

    /** Reads a recorded trace of {@code arch}'s kernel. */
    public static ReferenceTrace read(Path file, Arch arch) throws IOException {
        return parse(GuestText.decode(Files.readAllBytes(file)), arch, file.toString());   // Linux's bytes, UTF-8 or not
    }

    /**
     * Parses a recorded trace.
     *
     * @throws IllegalArgumentException when a definition in the header or an event line is malformed
     */
    public static ReferenceTrace parse(String text, Arch arch, String source) {
        Objects.requireNonNull(arch);
        String release = null, pkg = null, version = null;
        List<String> defs = new ArrayList<>();
        List<String> lines = new ArrayList<>();
        List<Map.Entry<String, String>> header = new ArrayList<>();
        boolean inDefs = false;
        for (String l : text.split("\n")) {
            l = l.stripTrailing();
            if (l.startsWith("#")) {
                Matcher f = FIELD.matcher(l);
                if (f.matches()) header.add(Map.entry(f.group(1), f.group(2).strip()));
                Matcher m = KERNEL.matcher(l);
                if (m.matches()) {
                    release = m.group(1);
                    if (m.group(2) != null) {
                        for (String kv : m.group(2).trim().split("\\s+")) {
                            if (kv.startsWith("package=")) pkg = kv.substring(8);
                            else if (kv.startsWith("version=")) version = kv.substring(8);
                        }
                    }
                    inDefs = false;
                } else if (DEFS.matcher(l).matches()) {
                    inDefs = true;
                } else if (inDefs && l.startsWith("#   ")) {
                    defs.add(l.substring(4).trim());
                } else {
                    inDefs = false;
                }
                continue;
            }
            if (!l.isBlank()) lines.add(l);
        }
        Map<String, List<String>> names = new LinkedHashMap<>();
        Map<String, Boolean> ret = new LinkedHashMap<>();
        definitionsInto(defs, arch, names, ret);
        List<Event> events = new ArrayList<>(lines.size());
        for (String l : lines) {
            Event e = parseEvent(l, names);
            if (e == null) throw new IllegalArgumentException(source + ": not an event line: " + l);
            // an event whose arguments BTF named: the names are the ones Linux printed
            if (!names.containsKey(e.name()) && ret.containsKey(e.name())) names.put(e.name(), e.args().stream().map(Arg::name).toList());
            events.add(e);
        }
        return new ReferenceTrace(source, arch, release, pkg, version, defs, names, ret, events, header);
    }

    /** A probe definition's head: kind, event name (null when automatic), place. */
    private static final Pattern DEF_HEAD = Pattern.compile("^([prft])\\d*(?::(?:[^/\\s]*[/.])?(\\S*))?\\s+(\\S+).*");

    /**
     * Event names to argument names (and return-ness) from definitions, as the kernel would parse
     * them. A definition only a BTF-aware kernel takes (parameter names, {@code $arg*}) names its
     * arguments from that kernel's BTF, which the trace does not carry: its event is known (and
     * whether it returns), its argument names are read from the event lines.
     */
    static void definitionsInto(List<String> defs, Arch arch, Map<String, List<String>> names, Map<String, Boolean> ret) {
        ProbeParser parser = new ProbeParser(arch);
        ProbeParser btfSyntax = new ProbeParser(arch, Dialect.LINUX_7, KernelSymbols.permissive());
        for (String d : defs) {
            ProbeDefinition pd;
            try {
                pd = parser.parse(d);
            } catch (ProbeSyntaxException e) {
                Matcher h = DEF_HEAD.matcher(d.strip());
                boolean btf = true;     // a later kernel's syntax, or BTF names it cannot resolve here
                try {
                    if (btfSyntax.parse(d) instanceof TraceProbe later) {   // e.g. an fprobe or tracepoint probe
                        ret.putIfAbsent(later.event(), later.isReturn());
                        continue;
                    }
                } catch (ProbeSyntaxException e2) {
                    btf = e2.error() == KernelError.NO_BTF_ENTRY || e2.error() == KernelError.NOSUP_BTFARG;
                }
                if (!btf || !h.matches() || h.group(2) == null || h.group(2).isEmpty())
                    throw new IllegalArgumentException("reference definition rejected: " + d + "\n" + e, e);
                // an fprobe with a $retval argument is an exit probe (parse_symbol_and_return)
                ret.putIfAbsent(h.group(2), h.group(1).equals("r") || h.group(3).endsWith("%return")
                        || h.group(1).equals("f") && d.matches(".*\\$retval([^A-Za-z0-9_].*)?$"));
                continue;
            }
            if (pd instanceof TraceProbe p) {
                names.putIfAbsent(p.event(), p.args().stream().map(FetchArg::name).toList());
                ret.putIfAbsent(p.event(), p.isReturn());
            }
        }
    }

    /** Argument names by event, from a set of definitions ({@code kprobe_events} lines). */
    public static Map<String, List<String>> argumentNames(List<String> definitions, Arch arch) {
        Map<String, List<String>> names = new LinkedHashMap<>();
        definitionsInto(definitions, arch, names, new LinkedHashMap<>());
        return names;
    }

    /** Every {@code # key: value} line of the header, in order (a key may repeat). */
    public List<Map.Entry<String, String>> header() { return header; }

    /** The first value of header field {@code key} ({@code # key: value}), or null. */
    public String headerField(String key) {
        return header.stream().filter(e -> e.getKey().equals(key)).map(Map.Entry::getValue).findFirst().orElse(null);
    }

    /** Where it was read from. */
    public String source() { return source; }

    public Arch arch() { return arch; }

    /** {@code uname -r} of the kernel that produced it ({@code 6.1.0-56-amd64}), or null. */
    public String kernelRelease() { return kernelRelease; }

    /** The Debian package ({@code linux-image-6.1.0-56-amd64}), or null. */
    public String packageName() { return packageName; }

    /** The Debian package version ({@code 6.1.192-2}), or null. */
    public String packageVersion() { return packageVersion; }

    /** The definitions it was recorded with, as listed in the header. */
    public List<String> definitions() { return definitions; }

    /** Names of the events the definitions create. */
    public List<String> eventNames() { return List.copyOf(argNames.keySet()); }

    /** Argument names of each defined event. */
    public Map<String, List<String>> argumentNames() { return argNames; }

    public List<Event> events() { return events; }

    /**
     * Parses one event line: a full {@code trace} line, a console line ({@code [ 1.23] ev: ...})
     * or the body ({@code ev: (...) args}). {@code argNames} (event to argument names, may be
     * empty) lets values contain {@code " x="}-like text; returns null when the line is no event.
     */
    public static Event parseEvent(String line, Map<String, List<String>> argNames) {
        String s = line.stripTrailing();
        Matcher m = TRACE_PREFIX.matcher(s);
        TraceContext context = null;
        if (m.matches()) {
            String tgid = m.group(3);
            context = new TraceContext(m.group(1), Integer.parseInt(m.group(2)),
                    tgid == null ? null : tgid.equals("-------") ? 0 : Integer.valueOf(tgid), Integer.parseInt(m.group(4)),
                    m.group(5), Long.parseLong(m.group(6)) * 1_000_000_000L + Long.parseLong(m.group(7)) * 1000L);
            s = m.group(8);
        } else {
            m = CONSOLE_PREFIX.matcher(s);
            if (m.matches()) s = m.group(1);
        }
        int colon = s.indexOf(": (");
        if (colon <= 0) return null;
        String name = s.substring(0, colon);
        if (!Bytes.isGoodName(name)) return null;
        int open = colon + 2;
        int close = s.indexOf(')', open);
        if (close < 0) return null;
        String place = s.substring(open + 1, close);
        String function = null;
        int arrow = place.indexOf(" <- ");
        if (arrow >= 0) {
            function = place.substring(arrow + 4);
            place = place.substring(0, arrow);
        }
        String rest = s.substring(close + 1);
        List<Arg> args = parseArgs(rest, argNames == null ? null : argNames.get(name));
        if (args == null) return null;
        return new Event(name, place, function, args, s, context);
    }

    /** {@code " a=1 b="x y" c={1,2}"} into arguments; null when malformed. */
    static List<Arg> parseArgs(String rest, List<String> names) {
        List<Arg> out = new ArrayList<>();
        int pos = 0, n = rest.length();
        int index = 0;
        while (pos < n) {
            if (rest.charAt(pos) != ' ') return null;
            pos++;
            int eq = rest.indexOf('=', pos);
            if (eq < 0) return null;
            String name = rest.substring(pos, eq);
            int vs = eq + 1;
            int ve;
            String next = names != null && index + 1 < names.size() ? " " + names.get(index + 1) + "=" : null;
            if (names != null && index == names.size() - 1) {
                ve = n;                                           // the last argument runs to the end
            } else if (next != null) {
                ve = vs < n && rest.charAt(vs) == '"' ? rest.indexOf("\"" + next, vs + 1) : -1;
                ve = ve >= 0 ? ve + 1 : rest.indexOf(next, vs);
                if (ve < 0) return null;
            } else {
                ve = scanValue(rest, vs);
            }
            out.add(new Arg(name, rest.substring(vs, ve)));
            pos = ve;
            index++;
        }
        return out;
    }

    /** End of a value without knowing the argument names: a quoted string to the quote before {@code " name="} or the end, braces balanced, else the next space. */
    private static int scanValue(String s, int vs) {
        int n = s.length();
        if (vs < n && s.charAt(vs) == '"') {
            for (int i = vs + 1; i < n; i++) {
                if (s.charAt(i) == '"' && (i + 1 == n || nextArgAt(s, i + 1))) return i + 1;
            }
            return n;
        }
        if (vs < n && s.charAt(vs) == '{') {
            int depth = 0;
            boolean quoted = false;
            for (int i = vs; i < n; i++) {
                char c = s.charAt(i);
                if (c == '"') quoted = !quoted;
                else if (!quoted && c == '{') depth++;
                else if (!quoted && c == '}' && --depth == 0) return i + 1;
            }
            return n;
        }
        int sp = s.indexOf(' ', vs);
        return sp < 0 ? n : sp;
    }

    private static boolean nextArgAt(String s, int i) {
        if (s.charAt(i) != ' ') return false;
        int j = i + 1;
        while (j < s.length() && (Character.isLetterOrDigit(s.charAt(j)) || s.charAt(j) == '_')) j++;
        return j > i + 1 && j < s.length() && s.charAt(j) == '=';
    }

    /** The event lines of {@code lines} that belong to this trace's events (other output is skipped), parsed. */
    public List<Event> eventsOf(List<String> lines) {
        List<Event> out = new ArrayList<>();
        for (String l : lines) {
            Event e = parseEvent(l, argNames);
            if (e != null && argNames.containsKey(e.name())) out.add(e);
        }
        return out;
    }

    /** Whether the defined event {@code name} is a return probe. */
    public boolean isReturnEvent(String name) { return Boolean.TRUE.equals(returnEvents.get(name)); }
}
