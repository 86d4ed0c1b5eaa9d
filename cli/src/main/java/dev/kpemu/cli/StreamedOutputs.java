package dev.kpemu.cli;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import dev.kpemu.kprobes.events.EventEngine;
import dev.kpemu.kprobes.events.RecordedTrace;
import dev.kpemu.kprobes.events.RecordedTraceReader;
import dev.kpemu.kprobes.events.RecordedTraceWriter;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.StreamingTraceComparison;
import dev.kpemu.kprobes.events.TraceComparison;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;
import dev.kpemu.session.TracedBoot;

/**
 * The outputs of a traced boot that need the whole trace — {@code --record}, {@code --perfetto},
 * {@code --expect} — fed one event at a time as the guest runs ({@link TracedBoot#sink}), so no
 * output keeps every event: the record file is spooled to disk, the JSON is written as it goes,
 * the golden is read in step with the run. The header, known at the end, is given to
 * {@link #finish}.
 *
 * <p>An I/O error while the guest runs is kept and reported by {@link #finish} (nothing may
 * escape into the emulation thread); a damaged golden ends the comparison the same way.
 *
 * <p>A passive listener: it writes and compares, and acts on the run only at {@link #finish}, so
 * hits of register-only events may be recorded natively while it listens.
 */
final class StreamedOutputs implements EventEngine.PassiveListener, AutoCloseable {
    /** The run's header so far (its phases may still be empty): the comparison's mode needs it at the first event. */
    interface HeaderSoFar {
        RecordedTrace.Header get() throws IOException;
    }

    /** What {@link #finish} produced: events recorded, the JSON's counts, the comparison (each null when not asked for). */
    record Finished(Integer recorded, PerfettoTrace.Counts perfetto, TraceComparison.Outcome comparison) {}

    private final Map<String, List<String>> names;
    private final RecordedTraceWriter record;
    private final PerfettoTrace.Writer perfetto;
    private final RecordedTraceReader golden;
    private final TraceComparison.Choice choice;
    private final HeaderSoFar headerSoFar;
    private StreamingTraceComparison comparison;
    private Exception failure;

    /**
     * @param definitions the header's definitions ({@link TracedBoot#headerDefinitions})
     * @param record      the file {@code --record} writes, or null
     * @param perfetto    where {@code --perfetto} writes, or null
     * @param golden      {@code --expect}'s golden, opened, or null
     */
    StreamedOutputs(Arch arch, List<String> definitions, Path record, OutputStream perfetto, RecordedTraceReader golden,
                    TraceComparison.Choice choice, HeaderSoFar headerSoFar) throws IOException {
        this.names = ReferenceTrace.argumentNames(definitions, arch);
        this.record = record == null ? null : new RecordedTraceWriter(record, arch, definitions);
        this.perfetto = perfetto == null ? null : new PerfettoTrace.Writer(perfetto, arch, definitions);
        this.golden = golden;
        this.choice = choice;
        this.headerSoFar = headerSoFar;
    }

    @Override public void accept(TraceRecord r) {
        if (failure != null) return;
        try {
            String line = r.line();
            ReferenceTrace.Event e = RecordedTrace.kept(line, names);
            if (e == null) return;
            if (record != null) record.add(line);
            if (perfetto != null) perfetto.event(e);
            if (golden != null) comparison().actual(e);
        } catch (IOException | RuntimeException ex) {
            failure = ex;
        }
    }

    private StreamingTraceComparison comparison() throws IOException {
        if (comparison == null)
            comparison = new StreamingTraceComparison(golden.header(), golden.source(), golden, headerSoFar.get(), "this run", choice);
        return comparison;
    }

    /**
     * Writes the record file's header and events, ends the JSON, and ends the comparison (when
     * {@code compare}: the golden's remaining events are missing ones).
     *
     * @throws IOException the first failure while the guest ran, or now
     */
    Finished finish(RecordedTrace.Header header, boolean compare) throws IOException {
        rethrow();
        Integer recorded = null;
        if (record != null) {
            record.finish(header);
            recorded = record.count();
        }
        PerfettoTrace.Counts counts = perfetto == null ? null : perfetto.finish(header);
        TraceComparison.Outcome outcome = null;
        if (golden != null && compare) {
            try {
                outcome = comparison().finish();
            } catch (RuntimeException e) {
                failure = e;
            }
            rethrow();
        }
        return new Finished(recorded, counts, outcome);
    }

    private void rethrow() throws IOException {
        switch (failure) {
            case null -> { }
            case IOException e -> throw e;
            case RuntimeException e -> throw e;
            default -> throw new IOException(failure);
        }
    }

    @Override public void close() throws IOException {
        try {
            if (record != null) record.close();
        } finally {
            try {
                if (perfetto != null) perfetto.close();
            } finally {
                if (golden != null) golden.close();
            }
        }
    }
}
