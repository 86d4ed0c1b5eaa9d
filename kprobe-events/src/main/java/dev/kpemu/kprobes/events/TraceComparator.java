package dev.kpemu.kprobes.events;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Compares kpemu's event lines with a {@link ReferenceTrace} recorded from Linux itself, event
 * by event: event name, probe point, return site and probed function, every argument (name and
 * value). Timestamps, pids, comm, cpu and latency columns are never compared (kpemu's lines
 * may be full {@code trace} lines; only the part after the context is used).
 *
 * <h2>Kernel builds: the rule</h2>
 * Debian publishes new builds of its kernel; the recorded trace names the build it came from
 * ({@code # kernel: <release> (package=... version=...)}). The comparison is
 * <ul>
 * <li>{@link Mode#EXACT} when the booted kernel is the recorded one: same release
 *     ({@code uname -r}, e.g. {@code 6.1.0-56-amd64}) and, when both are known, the same
 *     package version (Debian sometimes rebuilds without changing the release). Every field
 *     must be equal, symbol sizes and offsets included.</li>
 * <li>{@link Mode#TOLERANT} otherwise (or when the booted release is unknown). A rebuild moves
 *     code but not the workload's meaning, so:
 *     <ul>
 *     <li>kprobe probe point {@code sym+0xoff/0xsize}: symbol and offset must be equal (the
 *         definition fixes them), the size is ignored;</li>
 *     <li>kretprobe return site {@code caller+0xoff/0xsize}: only the caller symbol must be equal
 *         (the call instruction may move inside it); the probed function must be equal;</li>
 *     <li>argument values printed as symbols ({@code sym+0xoff/0xsize}, the {@code symbol}
 *         type): the symbol name must be equal;</li>
 *     <li>every other argument value (numbers, strings, arrays, faults) must be equal.</li>
 *     </ul>
 *     When the comparison fails in this mode, re-record the reference for the new build
 *     ({@code guest-images/record-reference.sh}).</li>
 * </ul>
 * The number of events must be equal in both modes (the guest workload is deterministic);
 * surplus or missing events are reported as mismatches.
 *
 * <h2>kpemu against kpemu</h2>
 * Two kpemu traces of the same workload ({@link RecordedTrace}, {@code kpemu boot --record}) can be
 * compared more strictly ({@link #compareEvents(List, List, Mode, Context)}): the task
 * ({@code comm-pid}) and cpu columns too, and on the same kernel build also the timestamps, since
 * guest time is executed instructions, not host time.
 */
public final class TraceComparator {
    /** How strictly probe points and symbol values are compared. */
    public enum Mode { EXACT, TOLERANT }

    /** One difference: the event index (0-based), what differs, and both values. */
    public record Mismatch(int index, String field, String expected, String actual) {
        @Override public String toString() {
            return String.format("event #%d %s: expected %s, got %s", index, field, expected, actual);
        }
    }

    /** The outcome of a comparison. */
    public record Result(Mode mode, int expectedEvents, int actualEvents, List<Mismatch> mismatches) {
        public Result {
            mismatches = List.copyOf(mismatches);
        }

        public boolean matches() { return mismatches.isEmpty(); }

        /** A human-readable report: the mode, the counts and up to {@code max} mismatches. */
        public String report(int max) {
            StringBuilder sb = new StringBuilder();
            sb.append(matches() ? "MATCH" : "MISMATCH").append(" (").append(mode).append(" comparison): ")
                    .append(actualEvents).append(" events, reference ").append(expectedEvents).append('\n');
            int n = 0;
            for (Mismatch m : mismatches) {
                if (n++ == max) {
                    sb.append("  ... ").append(mismatches.size() - max).append(" more\n");
                    break;
                }
                sb.append("  ").append(m).append('\n');
            }
            return sb.toString();
        }

        public String report() { return report(20); }
    }

    private static final Pattern SYM = Pattern.compile("^(.+?)\\+0x([0-9a-f]+)/0x([0-9a-f]+)( \\[\\S+\\])?$");

    private TraceComparator() {}

    /**
     * The mode for a booted kernel: {@link Mode#EXACT} when release (and package version, when
     * both are known) equal the reference's, else {@link Mode#TOLERANT}.
     */
    public static Mode mode(ReferenceTrace ref, String bootedRelease, String bootedPackageVersion) {
        if (bootedRelease == null || ref.kernelRelease() == null || !bootedRelease.equals(ref.kernelRelease()))
            return Mode.TOLERANT;
        if (bootedPackageVersion != null && ref.packageVersion() != null && !bootedPackageVersion.equals(ref.packageVersion()))
            return Mode.TOLERANT;
        return Mode.EXACT;
    }

    /** Compares {@code lines} (kpemu output; non-event lines are skipped) with the reference, the mode chosen by {@link #mode}. */
    public static Result compare(ReferenceTrace ref, List<String> lines, String bootedRelease, String bootedPackageVersion) {
        return compare(ref, lines, mode(ref, bootedRelease, bootedPackageVersion));
    }

    /** Compares {@code lines} (kpemu output; lines of other events and non-event lines are skipped) with the reference. */
    public static Result compare(ReferenceTrace ref, List<String> lines, Mode mode) {
        return compareEvents(ref.events(), ref.eventsOf(lines), mode);
    }

    /**
     * Which context columns are compared besides the event itself (only where both events have
     * them: Linux's recorded references have none).
     *
     * @param task       comm, pid and cpu
     * @param timestamps the timestamps (microseconds, as printed)
     */
    public record Context(boolean task, boolean timestamps) {
        /** The event only, as against Linux's own references. */
        public static final Context NONE = new Context(false, false);
    }

    /** Compares two parsed event sequences (the events only, no context columns). */
    public static Result compareEvents(List<ReferenceTrace.Event> expected, List<ReferenceTrace.Event> actual, Mode mode) {
        return compareEvents(expected, actual, mode, Context.NONE);
    }

    /** Compares two parsed event sequences, and the context columns {@code context} names. */
    public static Result compareEvents(List<ReferenceTrace.Event> expected, List<ReferenceTrace.Event> actual, Mode mode,
                                       Context context) {
        Objects.requireNonNull(mode);
        Objects.requireNonNull(context);
        List<Mismatch> out = new ArrayList<>();
        int n = Math.min(expected.size(), actual.size());
        for (int i = 0; i < n; i++) {
            compareContext(i, expected.get(i).context(), actual.get(i).context(), context, out);
            compareEvent(i, expected.get(i), actual.get(i), mode, out);
        }
        for (int i = n; i < expected.size(); i++) out.add(new Mismatch(i, "event", expected.get(i).body(), "nothing (missing)"));
        for (int i = n; i < actual.size(); i++) out.add(new Mismatch(i, "event", "nothing (surplus)", actual.get(i).body()));
        return new Result(mode, expected.size(), actual.size(), out);
    }

    static void compareContext(int i, TraceContext e, TraceContext a, Context what, List<Mismatch> out) {
        if (e == null || a == null) return;
        if (what.task()) {
            String x = e.comm() + "-" + e.pid(), y = a.comm() + "-" + a.pid();
            if (!x.equals(y)) out.add(new Mismatch(i, "task", x, y));
            if (e.cpu() != a.cpu()) out.add(new Mismatch(i, "cpu", String.valueOf(e.cpu()), String.valueOf(a.cpu())));
        }
        if (what.timestamps() && e.timestampNanos() / 1000 != a.timestampNanos() / 1000)
            out.add(new Mismatch(i, "timestamp", seconds(e.timestampNanos()), seconds(a.timestampNanos())));
    }

    /** A timestamp as ftrace prints it: seconds with microseconds. */
    static String seconds(long nanos) {
        long us = nanos / 1000;
        return String.format("%d.%06d", us / 1_000_000, us % 1_000_000);
    }

    static void compareEvent(int i, ReferenceTrace.Event e, ReferenceTrace.Event a, Mode mode, List<Mismatch> out) {
        if (!e.name().equals(a.name())) {
            out.add(new Mismatch(i, "event name", e.name(), a.name() + "  [" + a.body() + "]"));
            return;
        }
        if (e.isReturn() != a.isReturn()) {
            out.add(new Mismatch(i, "probe kind", e.body(), a.body()));
            return;
        }
        if (e.isReturn()) {
            if (!sameSymbol(e.probePoint(), a.probePoint(), mode, Part.SYMBOL_ONLY))
                out.add(new Mismatch(i, "return site", e.probePoint(), a.probePoint()));
            if (!Objects.equals(e.function(), a.function()))
                out.add(new Mismatch(i, "probed function", e.function(), a.function()));
        } else if (!sameSymbol(e.probePoint(), a.probePoint(), mode, Part.SYMBOL_AND_OFFSET)) {
            out.add(new Mismatch(i, "probe point", e.probePoint(), a.probePoint()));
        }
        List<ReferenceTrace.Arg> ea = e.args(), aa = a.args();
        if (ea.size() != aa.size()) out.add(new Mismatch(i, "argument count", ea.size() + " " + ea, aa.size() + " " + aa));
        for (int j = 0; j < Math.min(ea.size(), aa.size()); j++) {
            ReferenceTrace.Arg x = ea.get(j), y = aa.get(j);
            if (!x.name().equals(y.name())) {
                out.add(new Mismatch(i, "argument #" + (j + 1) + " name", x.name(), y.name()));
            } else if (!sameValue(x.value(), y.value(), mode)) {
                out.add(new Mismatch(i, "argument " + x.name(), x.value(), y.value()));
            }
        }
    }

    private enum Part { SYMBOL_ONLY, SYMBOL_AND_OFFSET }

    /** Probe points and return sites under the mode's rule. */
    static boolean sameSymbol(String expected, String actual, Mode mode, Part tolerant) {
        if (expected.equals(actual)) return true;
        if (mode == Mode.EXACT) return false;
        Matcher x = SYM.matcher(expected), y = SYM.matcher(actual);
        if (!x.matches() || !y.matches()) return false;
        if (!x.group(1).equals(y.group(1)) || !Objects.equals(x.group(4), y.group(4))) return false;
        return tolerant == Part.SYMBOL_ONLY || x.group(2).equals(y.group(2));
    }

    /** Argument values: exact, except symbol-formatted values in {@link Mode#TOLERANT}, compared by symbol name. */
    static boolean sameValue(String expected, String actual, Mode mode) {
        if (expected.equals(actual)) return true;
        if (mode == Mode.EXACT) return false;
        return sameSymbol(expected, actual, mode, Part.SYMBOL_ONLY);
    }
}
