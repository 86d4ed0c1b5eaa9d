package dev.kpemu.kprobes.events;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.kpemu.machine.Arch;

/**
 * A trace kpemu recorded ({@code kpemu boot --record FILE}): a header that names everything the
 * trace depends on — the kernel (release, Debian package and version, the file's sha256 and the
 * kernel's ELF build-id note), the arch, kpemu's version, the kernel command line, the initramfs
 * (file name and sha256), where the probes were registered and their definitions, the guest-time
 * phases — then the events as full ftrace {@code trace} lines.
 *
 * <pre>
 * # kpemu recorded trace: compare with 'kpemu compare GOLDEN NEW' or 'kpemu boot ... --expect GOLDEN'
 * # format: kpemu-trace 1
 * # kernel: 6.1.0-56-amd64 (package=linux-image-6.1.0-56-amd64 version=6.1.192-2 )
 * # kernel-file: vmlinuz sha256=5f1c...
 * # build-id: 8d0e...
 * # arch: x86_64
 * # kpemu: 0.1.0-SNAPSHOT
 * # cmdline: console=ttyS0 nokaslr
 * # initramfs: initramfs.cpio sha256=a0b1...
 * # registered-at: init_kprobe_trace
 * # phase: boot 0.000000 1.450112
 * # phase: init 1.450112 2.472001
 * # events: 36
 * # definitions (command line):
 * #   p:myopen do_sys_openat2 dfd=%di fn=+0(%si):ustring
 * #   r:myret do_sys_openat2 ret=$retval
 *             init-1       [000] .....     1.455730: myopen: (do_sys_openat2+0x0/0x170) dfd=0xffffff9c fn="/init"
 * </pre>
 *
 * The file is a {@link ReferenceTrace} too (same {@code # kernel:} and definitions lines), so
 * {@link TraceComparator} reads its events; {@link TraceComparison} compares two of them.
 */
public final class RecordedTrace {
    /** The {@code # format:} value this class writes. */
    public static final String FORMAT = "kpemu-trace 1";

    /** A phase of kpemu's run in guest time ({@code boot}: power-on to /init; {@code init}: /init to power-off). */
    public record Phase(String name, long startNanos, long endNanos) {
        public Phase {
            Objects.requireNonNull(name);
            if (!name.matches("[a-z][a-z0-9-]*")) throw new IllegalArgumentException("bad phase name: " + name);
        }
    }

    /**
     * What a trace depends on. Any field but {@code arch} and {@code definitions} may be null
     * (unknown: a kernel file without a banner, a kernel without a build-id note).
     */
    public record Header(Arch arch, String kernelRelease, String packageName, String packageVersion,
                         String kernelFile, String kernelSha256, String buildId, String kpemuVersion,
                         String cmdline, String initramfs, String initramfsSha256, String registeredAt,
                         String definitionsSource, List<String> definitions, List<Phase> phases) {
        public Header {
            Objects.requireNonNull(arch);
            definitions = List.copyOf(definitions);
            phases = List.copyOf(phases);
        }
    }

    /** A file that is no kpemu trace, or a damaged one: the message is one line that says which and why. */
    public static final class MalformedTraceException extends IllegalArgumentException {
        public MalformedTraceException(String message) { super(message); }
    }

    private static final Pattern SHA = Pattern.compile("^(.*?)\\s*sha256=([0-9a-f]{64})$");
    private static final Pattern PHASE = Pattern.compile("^([a-z][a-z0-9-]*) (\\d+)\\.(\\d{6}) (\\d+)\\.(\\d{6})$");

    private final Header header;
    private final ReferenceTrace trace;

    private RecordedTrace(Header header, ReferenceTrace trace) {
        this.header = header;
        this.trace = trace;
    }

    public Header header() { return header; }

    /** The events, each with its context columns. */
    public List<ReferenceTrace.Event> events() { return trace.events(); }

    /** The file or name it was read from. */
    public String source() { return trace.source(); }

    /** The underlying parsed trace (argument names, return events). */
    public ReferenceTrace trace() { return trace; }

    /**
     * The file's text: the header, then {@code traceLines} (full {@code trace} lines; other lines
     * of kpemu's output are dropped: only events of the header's definitions are kept).
     */
    public static String format(Header h, List<String> traceLines) {
        Map<String, List<String>> names = ReferenceTrace.argumentNames(h.definitions(), h.arch());
        List<String> events = new ArrayList<>();
        for (String l : traceLines) if (keeps(l, names)) events.add(l.stripTrailing());
        StringBuilder sb = new StringBuilder(headerText(h, events.size()));
        for (String e : events) sb.append(e).append('\n');
        return sb.toString();
    }

    /** Whether {@link #format} keeps {@code traceLine}: an event, with its context columns, of a defined event. */
    static boolean keeps(String traceLine, Map<String, List<String>> names) { return kept(traceLine, names) != null; }

    /**
     * {@code traceLine} parsed, when {@link #format} keeps it (an event, with its context columns,
     * of an event {@code names} defines: {@link ReferenceTrace#argumentNames}), else null.
     */
    public static ReferenceTrace.Event kept(String traceLine, Map<String, List<String>> names) {
        ReferenceTrace.Event e = ReferenceTrace.parseEvent(traceLine.stripTrailing(), names);
        return e != null && e.context() != null && names.containsKey(e.name()) ? e : null;
    }

    /** The header {@link #format} writes before {@code events} event lines. */
    public static String headerText(Header h, int events) {
        StringBuilder sb = new StringBuilder();
        sb.append("# kpemu recorded trace: compare with 'kpemu compare GOLDEN NEW' or 'kpemu boot ... --expect GOLDEN'\n");
        sb.append("# format: ").append(FORMAT).append('\n');
        sb.append("# kernel: ").append(h.kernelRelease() == null || h.kernelRelease().isEmpty() ? "unknown" : h.kernelRelease());
        if (h.packageName() != null || h.packageVersion() != null) {
            sb.append(" (");
            if (h.packageName() != null) sb.append("package=").append(h.packageName()).append(' ');
            if (h.packageVersion() != null) sb.append("version=").append(h.packageVersion()).append(' ');
            sb.append(')');
        }
        sb.append('\n');
        if (h.kernelFile() != null || h.kernelSha256() != null)
            sb.append("# kernel-file: ").append(named(h.kernelFile(), h.kernelSha256())).append('\n');
        if (h.buildId() != null) sb.append("# build-id: ").append(h.buildId()).append('\n');
        sb.append("# arch: ").append(h.arch().linuxName()).append('\n');
        if (h.kpemuVersion() != null) sb.append("# kpemu: ").append(h.kpemuVersion()).append('\n');
        if (h.cmdline() != null) sb.append("# cmdline: ").append(h.cmdline()).append('\n');
        if (h.initramfs() != null || h.initramfsSha256() != null)
            sb.append("# initramfs: ").append(named(h.initramfs(), h.initramfsSha256())).append('\n');
        if (h.registeredAt() != null) sb.append("# registered-at: ").append(h.registeredAt()).append('\n');
        for (Phase p : h.phases())
            sb.append("# phase: ").append(p.name()).append(' ').append(TraceComparator.seconds(p.startNanos()))
                    .append(' ').append(TraceComparator.seconds(p.endNanos())).append('\n');
        sb.append("# events: ").append(events).append('\n');
        sb.append("# definitions (").append(h.definitionsSource() == null ? "command line" : h.definitionsSource()).append("):\n");
        for (String d : h.definitions()) sb.append("#   ").append(d).append('\n');
        return sb.toString();
    }

    private static String named(String name, String sha) {
        String n = name == null ? "" : name.replace('\n', ' ');
        return sha == null ? n : (n.isEmpty() ? "" : n + " ") + "sha256=" + sha;
    }

    /** The trace {@link #format} would write, parsed back. */
    public static RecordedTrace of(Header h, List<String> traceLines, String source) {
        return parse(format(h, traceLines), source);
    }

    /** Writes {@link #format}'s text to {@code file}. */
    public static void write(Path file, Header h, List<String> traceLines) throws IOException {
        Files.write(file, GuestText.encode(format(h, traceLines)));
    }

    /**
     * Reads a recorded trace.
     *
     * @throws NoSuchFileException when it does not exist
     * @throws MalformedTraceException when it is no kpemu trace or is damaged
     */
    public static RecordedTrace read(Path file) throws IOException {
        // the events' strings are the guest's bytes, UTF-8 or not (GuestText)
        return parse(GuestText.decode(Files.readAllBytes(file)), file.toString());
    }

    /** Parses a recorded trace's text; {@code source} names it in messages. */
    public static RecordedTrace parse(String text, String source) {
        String archName = null;
        for (String l : text.split("\n")) {
            if (l.startsWith("# arch: ")) {
                archName = l.substring(8).strip();
                break;
            }
        }
        if (archName == null)
            throw new MalformedTraceException(source + ": not a kpemu trace (no '# arch:' header line; record one with kpemu boot --record)");
        Arch arch;
        try {
            arch = Arch.parse(archName);
        } catch (RuntimeException e) {
            throw new MalformedTraceException(source + ": unknown arch '" + archName + "' in the header");
        }
        ReferenceTrace t;
        try {
            t = ReferenceTrace.parse(text, arch, source);
        } catch (IllegalArgumentException e) {
            String m = e.getMessage() == null ? e.toString() : e.getMessage().lines().findFirst().orElse("");
            throw new MalformedTraceException(m.startsWith(source) ? m : source + ": " + m);
        }
        String declared = t.headerField("events");
        if (declared != null && !declared.equals(String.valueOf(t.events().size())))
            throw new MalformedTraceException(source + ": damaged: the header says " + declared + " events, the file has "
                    + t.events().size());
        for (ReferenceTrace.Event e : t.events()) {
            if (!t.argumentNames().containsKey(e.name()))
                throw new MalformedTraceException(source + ": event '" + e.name() + "' is not defined in the header: " + e.body());
        }
        String release = t.kernelRelease();
        if ("unknown".equals(release)) release = null;
        String[] kf = split(t.headerField("kernel-file")), rd = split(t.headerField("initramfs"));
        List<Phase> phases = new ArrayList<>();
        for (Map.Entry<String, String> f : t.header()) {
            if (!f.getKey().equals("phase")) continue;
            Matcher m = PHASE.matcher(f.getValue());
            if (!m.matches()) throw new MalformedTraceException(source + ": bad phase line: # phase: " + f.getValue());
            phases.add(new Phase(m.group(1), nanos(m.group(2), m.group(3)), nanos(m.group(4), m.group(5))));
        }
        String defsSource = null;
        for (String l : text.split("\n")) {
            if (l.startsWith("# definitions (") && l.endsWith("):")) {
                defsSource = l.substring(15, l.length() - 2);
                break;
            }
        }
        Header h = new Header(arch, release, t.packageName(), t.packageVersion(), kf[0], kf[1], t.headerField("build-id"),
                t.headerField("kpemu"), t.headerField("cmdline"), rd[0], rd[1], t.headerField("registered-at"),
                defsSource, t.definitions(), phases);
        return new RecordedTrace(h, t);
    }

    private static long nanos(String s, String us) { return Long.parseLong(s) * 1_000_000_000L + Long.parseLong(us) * 1000L; }

    /** {@code "name sha256=HEX"} into name and hash (either may be null). */
    private static String[] split(String v) {
        if (v == null) return new String[2];
        Matcher m = SHA.matcher(v);
        if (m.matches()) return new String[] {m.group(1).isEmpty() ? null : m.group(1), m.group(2)};
        return new String[] {v.isEmpty() ? null : v, null};
    }

    /**
     * Whether both traces come from the same kernel build: the same build-id when both have one,
     * else the same kernel file (sha256) when both have one, else the same release and package
     * version (as {@link TraceComparator#mode} decides against Linux's references).
     */
    public boolean sameKernelBuild(RecordedTrace o) { return sameKernelBuild(header, o.header); }

    /** {@link #sameKernelBuild(RecordedTrace)} on two headers. */
    public static boolean sameKernelBuild(Header a, Header b) {
        if (a.arch() != b.arch()) return false;
        if (a.buildId() != null && b.buildId() != null) return a.buildId().equals(b.buildId());
        if (a.kernelSha256() != null && b.kernelSha256() != null) return a.kernelSha256().equals(b.kernelSha256());
        if (a.kernelRelease() == null || !a.kernelRelease().equals(b.kernelRelease())) return false;
        return a.packageVersion() == null || b.packageVersion() == null || a.packageVersion().equals(b.packageVersion());
    }

    /**
     * Whether both traces come from the same workload: the same arch, kernel command line,
     * initramfs (sha256), registration point and definitions.
     */
    public boolean sameWorkload(RecordedTrace o) { return sameWorkload(header, o.header); }

    /** {@link #sameWorkload(RecordedTrace)} on two headers. */
    public static boolean sameWorkload(Header a, Header b) {
        return a.arch() == b.arch() && Objects.equals(a.cmdline(), b.cmdline())
                && Objects.equals(a.initramfsSha256(), b.initramfsSha256())
                && Objects.equals(a.registeredAt(), b.registeredAt()) && a.definitions().equals(b.definitions());
    }
}
