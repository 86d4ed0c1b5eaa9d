package dev.kpemu.kprobes.events;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Compares two {@link RecordedTrace}s — a golden and a new run — with {@link TraceComparator}
 * and renders the semantic diff {@code kpemu compare} and {@code kpemu boot --expect} print and
 * {@link TraceAssert} throws.
 *
 * <p>The mode: {@link Choice#AUTO} is {@link TraceComparator.Mode#EXACT} when both come from the
 * same kernel build ({@link RecordedTrace#sameKernelBuild}), else
 * {@link TraceComparator.Mode#TOLERANT} (symbol sizes and offsets a rebuild moves). In exact mode,
 * when both ran the same workload ({@link RecordedTrace#sameWorkload}), the task and cpu columns
 * are compared too, and the timestamps on the same kernel build (guest time is deterministic on
 * both arches).
 */
public final class TraceComparison {
    /** How the mode is chosen. */
    public enum Choice { AUTO, EXACT, TOLERANT }

    /** Events shown around the first divergence on each side. */
    public static final int CONTEXT_EVENTS = 3;
    /** Mismatches listed at the end of the diff. */
    public static final int LISTED = 10;

    /**
     * The outcome.
     *
     * @param result  the comparator's result
     * @param context which context columns were compared
     * @param notes   header differences worth knowing (kernel build, workload)
     * @param diff    the semantic diff (a one-line summary when they match)
     */
    public record Outcome(TraceComparator.Result result, TraceComparator.Context context, List<String> notes, String diff) {
        public Outcome {
            notes = List.copyOf(notes);
        }

        public boolean matches() { return result.matches(); }
    }

    private TraceComparison() {}

    /** The mode for {@code choice}. */
    public static TraceComparator.Mode mode(RecordedTrace expected, RecordedTrace actual, Choice choice) {
        return switch (choice) {
            case EXACT -> TraceComparator.Mode.EXACT;
            case TOLERANT -> TraceComparator.Mode.TOLERANT;
            case AUTO -> expected.sameKernelBuild(actual) ? TraceComparator.Mode.EXACT : TraceComparator.Mode.TOLERANT;
        };
    }

    /** Compares {@code actual} with {@code expected} (the golden). */
    public static Outcome compare(RecordedTrace expected, RecordedTrace actual, Choice choice) {
        Objects.requireNonNull(choice);
        if (expected.header().arch() != actual.header().arch())
            throw new IllegalArgumentException("cannot compare traces of different arches: " + expected.source() + " is "
                    + expected.header().arch().linuxName() + ", " + actual.source() + " is " + actual.header().arch().linuxName());
        TraceComparator.Mode mode = mode(expected, actual, choice);
        boolean sameBuild = expected.sameKernelBuild(actual), sameWorkload = expected.sameWorkload(actual);
        boolean task = mode == TraceComparator.Mode.EXACT && sameWorkload;
        boolean time = task && sameBuild;
        TraceComparator.Context ctx = new TraceComparator.Context(task, time);
        TraceComparator.Result r = TraceComparator.compareEvents(expected.events(), actual.events(), mode, ctx);
        List<String> notes = notes(expected, actual, sameBuild, mode, ctx);
        return new Outcome(r, ctx, notes, render(expected, actual, r, ctx, notes));
    }

    private static List<String> notes(RecordedTrace e, RecordedTrace a, boolean sameBuild, TraceComparator.Mode mode,
                                      TraceComparator.Context ctx) {
        List<String> out = new ArrayList<>();
        RecordedTrace.Header x = e.header(), y = a.header();
        if (!sameBuild)
            out.add("different kernel builds: " + build(x) + " vs " + build(y));
        if (!x.definitions().equals(y.definitions())) {
            for (int i = 0; i < Math.max(x.definitions().size(), y.definitions().size()); i++) {
                String d1 = i < x.definitions().size() ? x.definitions().get(i) : "(none)";
                String d2 = i < y.definitions().size() ? y.definitions().get(i) : "(none)";
                if (!d1.equals(d2)) {
                    out.add("definitions differ, first at #" + (i + 1) + ": " + d1 + "  vs  " + d2);
                    break;
                }
            }
        }
        if (!Objects.equals(x.cmdline(), y.cmdline())) out.add("kernel command lines differ: " + x.cmdline() + "  vs  " + y.cmdline());
        if (!Objects.equals(x.initramfsSha256(), y.initramfsSha256()))
            out.add("initramfs differ: " + x.initramfs() + " sha256=" + x.initramfsSha256() + "  vs  " + y.initramfs() + " sha256=" + y.initramfsSha256());
        if (!Objects.equals(x.registeredAt(), y.registeredAt()))
            out.add("probes registered at different points: " + x.registeredAt() + " vs " + y.registeredAt());
        if (mode == TraceComparator.Mode.EXACT && ctx.task() && !ctx.timestamps())
            out.add("timestamps not compared (different kernel builds)");
        return out;
    }

    private static String build(RecordedTrace.Header h) {
        StringBuilder sb = new StringBuilder(h.kernelRelease() == null ? "unknown release" : h.kernelRelease());
        if (h.packageVersion() != null) sb.append(" (").append(h.packageVersion()).append(')');
        if (h.buildId() != null) sb.append(" build-id ").append(h.buildId(), 0, Math.min(12, h.buildId().length()));
        else if (h.kernelSha256() != null) sb.append(" sha256 ").append(h.kernelSha256(), 0, 12);
        return sb.toString();
    }

    /** The event as a line: context columns (when known) and body. */
    static String line(ReferenceTrace.Event e) {
        TraceContext c = e.context();
        return c == null ? e.body() : String.format("%s-%d [%03d] %s %s: %s", c.comm(), c.pid(), c.cpu(), c.latency(),
                TraceComparator.seconds(c.timestampNanos()), e.body());
    }

    private static String render(RecordedTrace expected, RecordedTrace actual, TraceComparator.Result r,
                                 TraceComparator.Context ctx, List<String> notes) {
        StringBuilder sb = new StringBuilder();
        String what = r.mode() + (ctx.task() ? ", tasks" : "") + (ctx.timestamps() ? ", timestamps" : "");
        if (r.matches()) {
            sb.append("traces equal (").append(what).append("): ").append(r.actualEvents()).append(" events\n");
            for (String n : notes) sb.append("  note: ").append(n).append('\n');
            return sb.toString();
        }
        List<ReferenceTrace.Event> ex = expected.events(), ac = actual.events();
        sb.append("traces differ (").append(what).append("): expected ").append(ex.size()).append(" events (")
                .append(expected.source()).append("), got ").append(ac.size()).append(" (").append(actual.source()).append(")\n");
        for (String n : notes) sb.append("  note: ").append(n).append('\n');
        int first = r.mismatches().getFirst().index();
        sb.append("first divergent event: #").append(first).append('\n');
        side(sb, "expected", ex, first);
        side(sb, "actual", ac, first);
        sb.append("  fields that differ at #").append(first).append(":\n");
        for (TraceComparator.Mismatch m : r.mismatches()) {
            if (m.index() != first) break;
            sb.append("    ").append(m.field()).append(": expected ").append(m.expected()).append(", got ").append(m.actual()).append('\n');
        }
        Map<String, int[]> counts = new TreeMap<>();
        for (ReferenceTrace.Event e : ex) counts.computeIfAbsent(e.name(), k -> new int[2])[0]++;
        for (ReferenceTrace.Event e : ac) counts.computeIfAbsent(e.name(), k -> new int[2])[1]++;
        boolean header = false;
        for (Map.Entry<String, int[]> c : counts.entrySet()) {
            if (c.getValue()[0] == c.getValue()[1]) continue;
            if (!header) sb.append("per-event counts that differ:\n");
            header = true;
            sb.append(String.format("  %-24s expected %d, got %d%n", c.getKey(), c.getValue()[0], c.getValue()[1]));
        }
        if (!header) sb.append("per-event counts: all equal\n");
        TreeSet<Integer> indices = new TreeSet<>();
        for (TraceComparator.Mismatch m : r.mismatches()) indices.add(m.index());
        sb.append(r.mismatches().size()).append(" differences in ").append(indices.size()).append(" events");
        if (r.mismatches().size() > LISTED) sb.append("; the first ").append(LISTED);
        sb.append(":\n");
        int n = 0;
        for (TraceComparator.Mismatch m : r.mismatches()) {
            if (n++ == LISTED) break;
            sb.append("  ").append(m).append('\n');
        }
        return sb.toString();
    }

    private static void side(StringBuilder sb, String label, List<ReferenceTrace.Event> ev, int at) {
        sb.append("  ").append(label).append(":\n");
        int from = Math.max(0, at - CONTEXT_EVENTS), to = Math.min(ev.size(), at + CONTEXT_EVENTS + 1);
        if (from > 0) sb.append("        ...\n");
        for (int i = from; i < to; i++)
            sb.append(i == at ? "    > " : "      ").append(String.format("#%-4d ", i)).append(line(ev.get(i))).append('\n');
        if (at >= ev.size()) sb.append("    > ").append(String.format("#%-4d ", at)).append("(no event: the trace ends)\n");
        else if (to < ev.size()) sb.append("        ...\n");
    }
}
