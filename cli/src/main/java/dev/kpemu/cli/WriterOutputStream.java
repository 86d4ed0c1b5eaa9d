package dev.kpemu.cli;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;

import dev.kpemu.kprobes.events.GuestText;

/**
 * Bytes to a PrintWriter, a line at a time (so picocli's out can back a PrintStream): UTF-8 with
 * the guest's other bytes carried through ({@link GuestText}), so a trace line's bytes reach a
 * writer that encodes with {@link GuestText#CHARSET} (kpemu's stdout, {@link Main}) unchanged.
 */
final class WriterOutputStream extends OutputStream {
    private final PrintWriter writer;
    private final ByteArrayOutputStream line = new ByteArrayOutputStream();

    private WriterOutputStream(PrintWriter writer) { this.writer = writer; }

    static PrintStream printStream(PrintWriter w) {
        return new PrintStream(new WriterOutputStream(w), true, GuestText.CHARSET);
    }

    @Override public synchronized void write(int b) {
        line.write(b);
        if (b == '\n') drain();
    }

    @Override public synchronized void flush() {
        drain();
        writer.flush();
    }

    private void drain() {
        writer.write(GuestText.decode(line.toByteArray()));
        line.reset();
    }
}
