package dev.kpemu.kprobes.events;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * {@link TraceComparison} one event at a time, keeping only what the diff needs: the golden's
 * events are pulled from an iterator (a file read as it goes, {@link RecordedTraceReader}) as the
 * run's events arrive, so neither trace is ever held whole. Kept: the last
 * {@value TraceComparison#CONTEXT_EVENTS} + 1 events of each side until the first divergence, the
 * {@value TraceComparison#CONTEXT_EVENTS} after it, the mismatches of the first divergent event and
 * the first {@value TraceComparison#LISTED} others, and per-event-name counts.
 *
 * <p>The diff is the same text {@link TraceComparison#compare} renders from two whole traces (it
 * is implemented on this class).
 */
public final class StreamingTraceComparison {
    private final RecordedTrace.Header expectedHeader, actualHeader;
    private final String expectedSource, actualSource;
    private final Iterator<ReferenceTrace.Event> expected;
    private final TraceComparator.Mode mode;
    private final TraceComparator.Context context;
    private final List<String> notes;
    private final Side exp = new Side(), act = new Side();
    private final List<TraceComparator.Mismatch> kept = new ArrayList<>();
    private int index, first = -1, mismatches, divergentEvents, lastMismatchIndex = -1;
    private TraceComparison.Outcome outcome;

    /** What one side keeps. */
    private static final class Side {
        final Deque<ReferenceTrace.Event> before = new ArrayDeque<>();   // up to the divergence, the last CONTEXT_EVENTS + 1
        final List<ReferenceTrace.Event> after = new ArrayList<>();       // after it, CONTEXT_EVENTS
        final Map<String, Integer> counts = new TreeMap<>();
        int size;

        void add(ReferenceTrace.Event e, int first) {
            int i = size++;
            counts.merge(e.name(), 1, Integer::sum);
            if (first < 0) {
                before.addLast(e);
                if (before.size() > TraceComparison.CONTEXT_EVENTS + 1) before.removeFirst();
            } else if (i > first && i <= first + TraceComparison.CONTEXT_EVENTS) {
                after.add(e);
            }
        }
    }

    /**
     * @param expectedHeader the golden's header
     * @param expected       the golden's events, pulled as the run's arrive
     * @param actualHeader   the run's header (its phases are not compared and may be empty)
     */
    public StreamingTraceComparison(RecordedTrace.Header expectedHeader, String expectedSource, Iterator<ReferenceTrace.Event> expected,
                                    RecordedTrace.Header actualHeader, String actualSource, TraceComparison.Choice choice) {
        Objects.requireNonNull(choice);
        if (expectedHeader.arch() != actualHeader.arch())
            throw new IllegalArgumentException("cannot compare traces of different arches: " + expectedSource + " is "
                    + expectedHeader.arch().linuxName() + ", " + actualSource + " is " + actualHeader.arch().linuxName());
        this.expectedHeader = expectedHeader;
        this.actualHeader = actualHeader;
        this.expectedSource = expectedSource;
        this.actualSource = actualSource;
        this.expected = expected;
        boolean sameBuild = RecordedTrace.sameKernelBuild(expectedHeader, actualHeader);
        mode = switch (choice) {
            case EXACT -> TraceComparator.Mode.EXACT;
            case TOLERANT -> TraceComparator.Mode.TOLERANT;
            case AUTO -> sameBuild ? TraceComparator.Mode.EXACT : TraceComparator.Mode.TOLERANT;
        };
        boolean task = mode == TraceComparator.Mode.EXACT && RecordedTrace.sameWorkload(expectedHeader, actualHeader);
        context = new TraceComparator.Context(task, task && sameBuild);
        notes = TraceComparison.notes(expectedHeader, actualHeader, sameBuild, mode, context);
    }

    public TraceComparator.Mode mode() { return mode; }

    /** The run's next event (in order); pulls the golden's next one and compares them. */
    public void actual(ReferenceTrace.Event a) {
        if (outcome != null) throw new IllegalStateException("comparison finished");
        step(expected.hasNext() ? expected.next() : null, Objects.requireNonNull(a));
    }

    /** The run ended: the golden's remaining events are missing. The outcome (the same object on every call). */
    public TraceComparison.Outcome finish() {
        if (outcome == null) {
            while (expected.hasNext()) step(expected.next(), null);
            TraceComparator.Result r = new TraceComparator.Result(mode, exp.size, act.size, kept);
            outcome = new TraceComparison.Outcome(r, context, notes, render());
        }
        return outcome;
    }

    /** Whether no difference was seen so far. */
    public boolean matchesSoFar() { return mismatches == 0; }

    private void step(ReferenceTrace.Event e, ReferenceTrace.Event a) {
        int i = index++;
        if (e != null) exp.add(e, first);
        if (a != null) act.add(a, first);
        List<TraceComparator.Mismatch> found = new ArrayList<>(2);
        if (e != null && a != null) {
            TraceComparator.compareContext(i, e.context(), a.context(), context, found);
            TraceComparator.compareEvent(i, e, a, mode, found);
        } else if (e != null) {
            found.add(new TraceComparator.Mismatch(i, "event", e.body(), "nothing (missing)"));
        } else {
            found.add(new TraceComparator.Mismatch(i, "event", "nothing (surplus)", a.body()));
        }
        if (found.isEmpty()) return;
        if (first < 0) first = i;
        for (TraceComparator.Mismatch m : found) {
            if (m.index() == first || kept.size() < TraceComparison.LISTED) kept.add(m);
            mismatches++;
        }
        if (lastMismatchIndex != i) divergentEvents++;
        lastMismatchIndex = i;
    }

    private String render() {
        StringBuilder sb = new StringBuilder();
        String what = mode + (context.task() ? ", tasks" : "") + (context.timestamps() ? ", timestamps" : "");
        if (mismatches == 0) {
            sb.append("traces equal (").append(what).append("): ").append(act.size).append(" events\n");
            for (String n : notes) sb.append("  note: ").append(n).append('\n');
            return sb.toString();
        }
        sb.append("traces differ (").append(what).append("): expected ").append(exp.size).append(" events (")
                .append(expectedSource).append("), got ").append(act.size).append(" (").append(actualSource).append(")\n");
        for (String n : notes) sb.append("  note: ").append(n).append('\n');
        sb.append("first divergent event: #").append(first).append('\n');
        side(sb, "expected", exp);
        side(sb, "actual", act);
        sb.append("  fields that differ at #").append(first).append(":\n");
        for (TraceComparator.Mismatch m : kept) {
            if (m.index() != first) break;
            sb.append("    ").append(m.field()).append(": expected ").append(m.expected()).append(", got ").append(m.actual()).append('\n');
        }
        Map<String, int[]> counts = new TreeMap<>();
        exp.counts.forEach((k, v) -> counts.computeIfAbsent(k, x -> new int[2])[0] = v);
        act.counts.forEach((k, v) -> counts.computeIfAbsent(k, x -> new int[2])[1] = v);
        boolean header = false;
        for (Map.Entry<String, int[]> c : counts.entrySet()) {
            if (c.getValue()[0] == c.getValue()[1]) continue;
            if (!header) sb.append("per-event counts that differ:\n");
            header = true;
            sb.append(String.format("  %-24s expected %d, got %d%n", c.getKey(), c.getValue()[0], c.getValue()[1]));
        }
        if (!header) sb.append("per-event counts: all equal\n");
        sb.append(mismatches).append(" differences in ").append(divergentEvents).append(" events");
        if (mismatches > TraceComparison.LISTED) sb.append("; the first ").append(TraceComparison.LISTED);
        sb.append(":\n");
        int n = 0;
        for (TraceComparator.Mismatch m : kept) {
            if (n++ == TraceComparison.LISTED) break;
            sb.append("  ").append(m).append('\n');
        }
        return sb.toString();
    }

    /** The events around the first divergence on one side, numbered, the divergent one marked. */
    private void side(StringBuilder sb, String label, Side s) {
        sb.append("  ").append(label).append(":\n");
        int from = Math.max(0, first - TraceComparison.CONTEXT_EVENTS), to = Math.min(s.size, first + TraceComparison.CONTEXT_EVENTS + 1);
        if (from > 0) sb.append("        ...\n");
        List<ReferenceTrace.Event> kept = new ArrayList<>(s.before);
        kept.addAll(s.after);
        int firstKept = Math.min(s.size, first + 1) - s.before.size();   // index of before's first event
        for (int i = from; i < to; i++)
            sb.append(i == first ? "    > " : "      ").append(String.format("#%-4d ", i)).append(TraceComparison.line(kept.get(i - firstKept))).append('\n');
        if (first >= s.size) sb.append("    > ").append(String.format("#%-4d ", first)).append("(no event: the trace ends)\n");
        else if (to < s.size) sb.append("        ...\n");
    }
}
