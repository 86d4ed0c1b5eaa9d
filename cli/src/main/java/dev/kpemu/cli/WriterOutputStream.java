package dev.kpemu.cli;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;

/** UTF-8 bytes to a PrintWriter, a line at a time (so picocli's out can back a PrintStream). */
final class WriterOutputStream extends OutputStream {
    private final PrintWriter writer;
    private final ByteArrayOutputStream line = new ByteArrayOutputStream();

    private WriterOutputStream(PrintWriter writer) { this.writer = writer; }

    static PrintStream printStream(PrintWriter w) {
        return new PrintStream(new WriterOutputStream(w), true, StandardCharsets.UTF_8);
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
        writer.write(line.toString(StandardCharsets.UTF_8));
        line.reset();
    }
}
