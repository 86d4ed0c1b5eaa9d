package dev.kpemu.kprobes.events;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

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

    /** Compares {@code actual} with {@code expected} (the golden), as {@link StreamingTraceComparison} does event by event. */
    public static Outcome compare(RecordedTrace expected, RecordedTrace actual, Choice choice) {
        StreamingTraceComparison s = new StreamingTraceComparison(expected.header(), expected.source(), expected.events().iterator(),
                actual.header(), actual.source(), choice);
        for (ReferenceTrace.Event e : actual.events()) s.actual(e);
        return s.finish();
    }

    static List<String> notes(RecordedTrace.Header x, RecordedTrace.Header y, boolean sameBuild, TraceComparator.Mode mode,
                              TraceComparator.Context ctx) {
        List<String> out = new ArrayList<>();
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
}
