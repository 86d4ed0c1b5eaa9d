package dev.kpemu.kprobes.events;

import java.io.BufferedWriter;
import java.io.Closeable;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import dev.kpemu.machine.Arch;

/**
 * Writes a {@link RecordedTrace} file as the run goes ({@code kpemu boot --record}): each event
 * line goes to a spool file next to the target at once; {@link #finish} writes the header (which
 * needs the event count and the run's phases, known only at the end) and then the spooled events.
 * Nothing holds the events in memory. The file is what {@link RecordedTrace#format} gives for the
 * same lines.
 */
public final class RecordedTraceWriter implements Closeable {
    private final Path file, spool;
    private final Map<String, List<String>> names;
    private final BufferedWriter events;
    private int count;

    /** @param definitions the header's definitions: only their events are kept, as {@link RecordedTrace#format} keeps them */
    public RecordedTraceWriter(Path file, Arch arch, List<String> definitions) throws IOException {
        this.file = file;
        Path dir = file.toAbsolutePath().getParent();
        this.spool = Files.createTempFile(dir, "." + file.getFileName() + ".", ".events");
        this.names = ReferenceTrace.argumentNames(definitions, arch);
        this.events = Files.newBufferedWriter(spool, GuestText.CHARSET);
    }

    /** One full {@code trace} line; lines that are not events of the definitions are dropped. */
    public void add(String traceLine) throws IOException {
        if (!RecordedTrace.keeps(traceLine, names)) return;
        events.write(traceLine.stripTrailing());
        events.write('\n');
        count++;
    }

    /** Events written so far. */
    public int count() { return count; }

    /** Writes the file: {@code header} (with the count), then the events. */
    public void finish(RecordedTrace.Header header) throws IOException {
        events.close();
        try (OutputStream out = Files.newOutputStream(file)) {
            out.write(GuestText.encode(RecordedTrace.headerText(header, count)));
            Files.copy(spool, out);
        } finally {
            Files.deleteIfExists(spool);
        }
    }

    /** Drops the spool (after {@link #finish}: nothing left to do). */
    @Override public void close() throws IOException {
        events.close();
        Files.deleteIfExists(spool);
    }
}
