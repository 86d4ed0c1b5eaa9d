package dev.kpemu.cli;

import java.io.PrintStream;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.LockSupport;

import dev.kpemu.kprobes.events.EventEngine;
import dev.kpemu.kprobes.events.LineBytes;
import dev.kpemu.kprobes.events.TraceRecord;

/**
 * The text trace ({@code trace} lines): formatted as the events happen, straight into the bytes of
 * a batch, and written out by a thread of its own. An event the engine hands over as its line
 * ({@link EventEngine.LineListener}: no trigger, no filter) is copied in; a record is formatted
 * at once ({@link TraceRecord#appendLine(LineBytes)}), so lines stay in event order. A batch of
 * {@link #BATCH_BYTES} goes to the writer thread as it fills; a line waits at most
 * {@link #WRITE_NANOS} (and a poll) to be written and flushed, so lines appear as they happen
 * without a write for every few of them. At most {@link #MAX_BATCHES} full batches wait: a slow
 * output holds the guest back rather than growing memory. {@link #close} writes what is left and
 * stops the thread.
 *
 * <p>No lock: the emulating thread alone writes into the batch and publishes how far its lines
 * go with one volatile store per line; the writer writes out a batch's published lines that have
 * waited long enough while the emulating thread goes on filling it, and a full batch once it is
 * handed over. A full batch is queued before the next batch becomes the current one, and the
 * writer writes a current batch's lines only when it finds no batch queued after reading them,
 * so no line overtakes an earlier one. Batches never grow (a line longer than a batch goes out as a batch of its own), so
 * the published bytes never move. Formatting here rather than on the writer's thread costs the
 * emulating thread less than the record it no longer makes for each event (issue 30: a record,
 * its context, its body and a queue node per event, then a string builder's chars narrowed to
 * bytes on the writer).
 */
final class TraceLineWriter implements EventEngine.LineListener, AutoCloseable {
    /** Full batches waiting at most. */
    static final int MAX_BATCHES = 16;
    /**
     * How often the writer looks for lines that wait while events flow: each look is a wake-up of
     * its thread (a job of a million events a minute fills a batch about every 20 ms).
     */
    static final long POLL_NANOS = 20_000_000;
    /** The most a formatted line waits to be written while events flow (lines are written in batches): below what a reader notices. */
    static final long WRITE_NANOS = 50_000_000;
    /** Empty looks before the writer parks until a line wakes it. */
    static final int IDLE_POLLS = 3;
    /** Bytes of lines in a batch. */
    static final int BATCH_BYTES = 1 << 16;

    /** Lines' bytes: {@code a[0..n)} written by the emulating thread, {@code [0..published)} visible to the writer, {@code [0..written)} written out. */
    private static final class Batch {
        final byte[] a;
        int n;
        volatile int published;
        /** The writer's own. */
        int written;

        Batch(int size) { a = new byte[size]; }
    }

    private static final Batch END = new Batch(0);

    private final PrintStream out;
    private final Thread thread;
    /** Bytes of a batch ({@link #BATCH_BYTES}; tests make them small). */
    private final int batchBytes;
    /** The batch being filled: the emulating thread's; the writer reads its published lines. */
    private volatile Batch current;
    /** Full batches for the writer, in order. */
    private final Queue<Batch> full = new ConcurrentLinkedQueue<>();
    /** Batches written out, for reuse. */
    private final Queue<Batch> spare = new ConcurrentLinkedQueue<>();
    /** Batches handed over (the emulating thread's count) and written out (the writer's). */
    private long handedOver;
    private volatile long writtenBatches;
    /** A record's line, formatted before it is copied in (the emulating thread's). */
    private final LineBytes recordLine = new LineBytes(256);
    /** The writer is parked (or about to park) until a line arrives. */
    private volatile boolean parked;
    private volatile Throwable failure;
    private boolean closed;

    private TraceLineWriter(PrintStream out, int batchBytes) {
        this.out = out;
        this.batchBytes = batchBytes;
        this.current = new Batch(batchBytes);
        this.thread = Thread.ofPlatform().daemon().name("kpemu-trace-writer").unstarted(this::write);
    }

    /** A writer of trace lines to {@code out}, started. */
    static TraceLineWriter start(PrintStream out) { return start(out, BATCH_BYTES); }

    /** As above, with batches of {@code batchBytes}. */
    static TraceLineWriter start(PrintStream out, int batchBytes) {
        TraceLineWriter w = new TraceLineWriter(out, batchBytes);
        w.thread.start();
        return w;
    }

    @Override
    public void accept(TraceRecord r) {
        acceptLine(r.appendLine(recordLine.clear()));
    }

    @Override
    public void acceptLine(LineBytes line) {
        acceptLine(line.array(), 0, line.length());
    }

    /** A line that is {@code line[offset, offset + length)} (the native code's, {@link EventEngine.LineListener}). */
    @Override
    public void acceptLine(byte[] line, int offset, int length) {
        if (failure != null || closed) return;
        Batch b = batchFor(length + 1);
        append(b, line, offset, length);
        written(b);
    }

    /** A line that is {@code head} followed by {@code line[offset, offset + length)}. */
    @Override
    public void acceptLine(byte[] head, byte[] line, int offset, int length) {
        if (failure != null || closed) return;
        Batch b = batchFor(head.length + length + 1);
        System.arraycopy(head, 0, b.a, b.n, head.length);
        b.n += head.length;          // published with the rest
        append(b, line, offset, length);
        written(b);
    }

    /** Lines each followed by its newline: copied in one piece when they fit the current batch, else line by line. */
    @Override
    public void acceptLines(byte[] text, int offset, int length) {
        if (failure != null || closed) return;
        Batch b = current;
        if (b.n + length > b.a.length) {
            EventEngine.LineListener.super.acceptLines(text, offset, length);
            return;
        }
        System.arraycopy(text, offset, b.a, b.n, length);
        b.n += length;
        b.published = b.n;
        written(b);
    }

    /**
     * The batch a line of {@code len} bytes (its newline included) goes into: the current one,
     * handed over first when the line does not fit; a batch of its own for a line longer than a batch.
     */
    private Batch batchFor(int len) {
        Batch b = current;
        if (b.n + len > b.a.length) {
            handOver(b);
            b = current;
        }
        return len > b.a.length ? new Batch(len) : b;
    }

    /** After a line went into {@code b}: a batch of its own goes to the writer at once; the writer is woken if it sleeps. */
    private void written(Batch b) {
        if (b != current) handOver(b);
        else if (parked) wake();
    }

    private static void append(Batch b, byte[] line, int offset, int length) {
        int at = b.n;
        System.arraycopy(line, offset, b.a, at, length);
        b.a[at + length] = '\n';
        b.n = at + length + 1;
        b.published = b.n;
    }

    /** {@code b} to the writer (held back while {@link #MAX_BATCHES} wait); the current batch is followed by a fresh one. */
    private void handOver(Batch b) {
        while (handedOver - writtenBatches >= MAX_BATCHES) {     // the output is slower than the guest: wait for it
            if (failure != null || !thread.isAlive()) return;
            wake();
            LockSupport.parkNanos(POLL_NANOS / 10);
        }
        if (b.n == 0) return;
        full.offer(b);                 // queued before a new current batch is seen: the writer writes this first
        handedOver++;
        if (b == current) {
            Batch next = spare.poll();
            if (next == null) next = new Batch(batchBytes);
            next.n = 0;
            next.written = 0;
            next.published = 0;
            current = next;
        }
        if (parked) wake();
    }

    private void wake() {
        parked = false;
        LockSupport.unpark(thread);
    }

    private void write() {
        try {
            int idle = 0;
            long waitingSince = 0;      // when the writer first saw published lines of the current batch it has not written
            while (true) {
                Batch b = full.poll();
                if (b == END) return;
                if (b != null) {
                    if (b.n > b.written) out.write(b.a, b.written, b.n - b.written);
                    if (b.a.length == batchBytes) spare.offer(b);
                    writtenBatches++;
                    idle = 0;
                    continue;
                }
                Batch c = current;
                int published = c.published;
                if (!full.isEmpty()) continue;     // batches handed over before c's lines: those first
                if (published > c.written) {
                    long now = System.nanoTime();
                    if (waitingSince == 0) waitingSince = now;
                    if (idle >= IDLE_POLLS || now - waitingSince >= WRITE_NANOS) {
                        out.write(c.a, c.written, published - c.written);
                        c.written = published;
                        out.flush();
                        waitingSince = 0;
                    }
                    idle = 0;
                } else {
                    waitingSince = 0;
                }
                if (idle++ < IDLE_POLLS) {
                    LockSupport.parkNanos(POLL_NANOS);
                } else {
                    parked = true;               // then look once more: a line handed over before this sees the flag
                    Batch again = current;
                    if (full.isEmpty() && again.published == again.written) LockSupport.park(this);
                    parked = false;
                }
            }
        } catch (Throwable t) {
            failure = t;
            full.clear();
        }
    }

    /** Writes every line handed over and stops the thread; the output is flushed, not closed. */
    @Override
    public void close() {
        if (closed) return;
        closed = true;
        if (failure == null) {
            handOver(current);
            full.offer(END);
        }
        wake();
        try {
            thread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        out.flush();
        if (failure != null) throw new IllegalStateException("writing the trace failed: " + failure, failure);
    }
}
