package dev.kpemu.cli;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.function.Consumer;

import dev.kpemu.kprobes.events.TraceRecord;

/**
 * The text trace ({@code trace} lines) written on a thread of its own, as ftrace formats its
 * ring buffer when {@code trace_pipe} is read: the emulating thread only hands each event over
 * (the record holds the fetched values; {@link TraceRecord#line()} formats them here). Events
 * are written in order, whatever is waiting in one write (flushed when nothing more waits, so
 * lines appear as they happen). At most {@link #CAPACITY} events wait: a slow output holds the
 * guest back rather than growing memory. {@link #close} writes what is left and stops the thread.
 *
 * <p>The hand-over costs the emulating thread no wake-up while events flow: the writer looks at
 * the queue every {@link #POLL_NANOS} and only after {@link #IDLE_POLLS} empty looks waits to be
 * woken by the next event. Waiting in {@code take()} after every batch made each event's
 * {@code put} wake the writer (a futex call: the emulating thread's share of an event on the
 * booted kernel's workload was a third of the hit's Java under async-profiler).
 */
final class TraceLineWriter implements Consumer<TraceRecord>, AutoCloseable {
    /** Events waiting at most. */
    static final int CAPACITY = 8192;
    /** How often the writer looks at the queue while events flow: the most a line waits. */
    static final long POLL_NANOS = 1_000_000;
    /** Empty looks before the writer waits to be woken (50 ms without an event). */
    static final int IDLE_POLLS = 50;
    private static final TraceRecord END = new TraceRecord("", "", null, "", false, 0, 0);

    private final PrintStream out;
    private final BlockingQueue<TraceRecord> queue = new ArrayBlockingQueue<>(CAPACITY);
    private final Thread thread;
    private volatile Throwable failure;
    private boolean closed;

    private TraceLineWriter(PrintStream out) {
        this.out = out;
        this.thread = Thread.ofPlatform().daemon().name("kpemu-trace-writer").unstarted(this::write);
    }

    /** A writer of trace lines to {@code out}, started. */
    static TraceLineWriter start(PrintStream out) {
        TraceLineWriter w = new TraceLineWriter(out);
        w.thread.start();
        return w;
    }

    @Override
    public void accept(TraceRecord r) {
        if (failure != null) return;
        put(r);
    }

    private void put(TraceRecord r) {
        try {
            queue.put(r);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void write() {
        List<TraceRecord> batch = new ArrayList<>(CAPACITY);
        StringBuilder sb = new StringBuilder(1 << 16);
        try {
            int idle = 0;
            while (true) {
                TraceRecord first = queue.poll();
                if (first == null) {
                    if (idle++ < IDLE_POLLS) {
                        java.util.concurrent.locks.LockSupport.parkNanos(POLL_NANOS);
                        continue;
                    }
                    first = queue.take();
                }
                idle = 0;
                batch.add(first);
                queue.drainTo(batch);
                boolean end = false;
                for (TraceRecord r : batch) {
                    if (r == END) {
                        end = true;
                        break;
                    }
                    r.appendLine(sb).append('\n');
                }
                batch.clear();
                out.print(sb);
                sb.setLength(0);
                if (queue.isEmpty()) out.flush();
                if (end) return;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Throwable t) {
            failure = t;
            queue.clear();
        }
    }

    /** Writes every event handed over and stops the thread; the output is flushed, not closed. */
    @Override
    public void close() {
        if (closed) return;
        closed = true;
        if (failure == null) put(END);
        try {
            thread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        out.flush();
        if (failure != null) throw new IllegalStateException("writing the trace failed: " + failure, failure);
    }
}
