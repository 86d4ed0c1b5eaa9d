package dev.kpemu.kprobes.events;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.List;

/**
 * The golden-trace comparison as a test assertion (JUnit, TestNG or plain Java: it throws
 * {@link AssertionError}, whose message is {@link TraceComparison}'s semantic diff).
 *
 * <pre>
 * TracedBoot traced = new TracedBoot(definitions, null);
 * BootRunner.boot(options, traced);
 * TraceAssert.assertTraceMatches(Path.of("golden/open.x86_64.trace"), traced.recordedTrace(...));
 * </pre>
 */
public final class TraceAssert {
    private TraceAssert() {}

    /** Asserts that {@code actual} equals {@code expected} under {@code choice}'s mode. */
    public static TraceComparison.Outcome assertTraceMatches(RecordedTrace expected, RecordedTrace actual,
                                                             TraceComparison.Choice choice) {
        TraceComparison.Outcome o = TraceComparison.compare(expected, actual, choice);
        if (!o.matches()) throw new AssertionError(o.diff());
        return o;
    }

    /** Asserts that {@code actual} equals {@code expected}, the mode chosen from their headers. */
    public static TraceComparison.Outcome assertTraceMatches(RecordedTrace expected, RecordedTrace actual) {
        return assertTraceMatches(expected, actual, TraceComparison.Choice.AUTO);
    }

    /** Asserts that {@code actual} equals the golden file {@code golden} (a missing or damaged golden fails too). */
    public static TraceComparison.Outcome assertTraceMatches(Path golden, RecordedTrace actual) {
        return assertTraceMatches(readGolden(golden), actual, TraceComparison.Choice.AUTO);
    }

    /** Asserts that the recorded file {@code actual} equals the golden file {@code golden}. */
    public static TraceComparison.Outcome assertTraceMatches(Path golden, Path actual) {
        return assertTraceMatches(readGolden(golden), readGolden(actual), TraceComparison.Choice.AUTO);
    }

    /**
     * Asserts that kpemu's output lines {@code actualLines} (full trace lines; other lines are
     * skipped) equal the golden, taking the rest of the header ({@code actualHeader}) from the run.
     */
    public static TraceComparison.Outcome assertTraceMatches(Path golden, RecordedTrace.Header actualHeader, List<String> actualLines) {
        return assertTraceMatches(golden, RecordedTrace.of(actualHeader, actualLines, "actual"));
    }

    private static RecordedTrace readGolden(Path p) {
        try {
            return RecordedTrace.read(p);
        } catch (RecordedTrace.MalformedTraceException e) {
            throw new AssertionError(e.getMessage(), e);
        } catch (java.nio.file.NoSuchFileException e) {
            throw new AssertionError("no trace at " + p + " (record a golden with kpemu boot --record FILE)", e);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read trace " + p + ": " + e, e);
        }
    }
}
