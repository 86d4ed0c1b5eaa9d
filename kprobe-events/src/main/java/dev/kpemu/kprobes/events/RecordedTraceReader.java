package dev.kpemu.kprobes.events;

import java.io.BufferedReader;
import java.io.Closeable;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;

/**
 * A {@link RecordedTrace} file read as it goes: the header at once, the events one at a time,
 * so a long golden is never held whole ({@code kpemu boot --expect}). The same checks as
 * {@link RecordedTrace#read}: a line that is no event, an event the header does not define, or
 * an event count other than the header's is a {@link RecordedTrace.MalformedTraceException}
 * (from {@link #next} / {@link #hasNext} for the events).
 */
public final class RecordedTraceReader implements Iterator<ReferenceTrace.Event>, Closeable {
    private final Path file;
    private final BufferedReader in;
    private final RecordedTrace.Header header;
    private final Map<String, List<String>> names;
    private final String declared;
    private String pending;          // the next event line, or null
    private int read;
    private boolean ended;

    private RecordedTraceReader(Path file) throws IOException {
        this.file = file;
        this.in = Files.newBufferedReader(file, StandardCharsets.ISO_8859_1);   // bytes; GuestText per line
        try {
            StringBuilder head = new StringBuilder();
            String declared = null, l;
            while ((l = readLine()) != null) {
                if (!l.startsWith("#")) {
                    if (l.isBlank()) continue;
                    pending = l;
                    break;
                }
                if (l.startsWith("# events: ")) declared = l.substring(10).strip();
                else head.append(l).append('\n');
            }
            this.declared = declared;
            RecordedTrace t = RecordedTrace.parse(head.toString(), file.toString());
            this.header = t.header();
            this.names = t.trace().argumentNames();
        } catch (RuntimeException | IOException e) {
            in.close();
            throw e;
        }
    }

    /**
     * Opens a recorded trace and reads its header.
     *
     * @throws java.nio.file.NoSuchFileException when it does not exist
     * @throws RecordedTrace.MalformedTraceException when its header is no kpemu trace's
     */
    public static RecordedTraceReader open(Path file) throws IOException {
        return new RecordedTraceReader(file);
    }

    /** Reads the whole file once, keeping nothing: throws what reading its events would. */
    public static RecordedTrace.Header check(Path file) throws IOException {
        try (RecordedTraceReader r = open(file)) {
            while (r.hasNext()) r.next();
            return r.header();
        }
    }

    public RecordedTrace.Header header() { return header; }

    public String source() { return file.toString(); }

    @Override public boolean hasNext() {
        if (pending != null) return true;
        if (ended) return false;
        try {
            for (String l; (l = readLine()) != null; ) {
                if (l.isBlank() || l.startsWith("#")) continue;
                pending = l;
                return true;
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        ended = true;
        if (declared != null && !declared.equals(String.valueOf(read)))
            throw new RecordedTrace.MalformedTraceException(file + ": damaged: the header says " + declared + " events, the file has " + read);
        return false;
    }

    @Override public ReferenceTrace.Event next() {
        if (!hasNext()) throw new NoSuchElementException();
        String l = pending.stripTrailing();
        pending = null;
        ReferenceTrace.Event e = ReferenceTrace.parseEvent(l, names);
        if (e == null) throw new RecordedTrace.MalformedTraceException(file + ": not an event line: " + l);
        if (!names.containsKey(e.name()))
            throw new RecordedTrace.MalformedTraceException(file + ": event '" + e.name() + "' is not defined in the header: " + e.body());
        read++;
        return e;
    }

    private String readLine() throws IOException {
        String l = in.readLine();
        return l == null ? null : GuestText.fromLatin1(l);
    }

    @Override public void close() throws IOException { in.close(); }
}
