package dev.kpemu.cli;

import java.io.PrintStream;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.LockSupport;

import dev.kpemu.kprobes.events.EventEngine;
import dev.kpemu.kprobes.events.GuestText;
import dev.kpemu.kprobes.events.TraceRecord;

/**
 * The text trace ({@code trace} lines) written on a thread of its own, as ftrace formats its
 * ring buffer when {@code trace_pipe} is read: the emulating thread only hands each event over
 * (the record holds the fetched values; {@link TraceRecord#line()} formats them here). Events
 * are written in order, in writes of up to {@link #BATCH_CHARS} characters; a line waits at most
 * {@link #WRITE_NANOS} (and a poll) to be written and flushed, so lines appear as they happen
 * without a write for every few of them. At most {@link #CAPACITY} events wait: a slow output holds the
 * guest back rather than growing memory. {@link #close} writes what is left and stops the thread.
 *
 * <p>The hand-over takes no lock and wakes no thread while events flow: the records go through a
 * lock-free queue, the writer looks at it every {@link #POLL_NANOS} and only after
 * {@link #IDLE_POLLS} empty looks parks until the next event unparks it. (A blocking queue's lock
 * made the emulating thread wait on a futex whenever the writer drained it: 0.74 % of the
 * emulating thread's samples on the probed job, about 0.3 µs an event.) The writer publishes how
 * many records it took once per batch, which is all the emulating side reads to keep the bound.
 *
 * <p>A batch's lines are encoded to the guest's bytes at once, into arrays kept from batch to
 * batch: an all-ASCII batch a byte a char, anything else through {@link GuestText#encode}
 * (surrogate escapes included).
 */
final class TraceLineWriter implements EventEngine.PassiveListener, AutoCloseable {
    /** Events waiting at most. */
    static final int CAPACITY = 8192;
    /** How often the writer looks at the queue while events flow. */
    static final long POLL_NANOS = 4_000_000;
    /** The most a formatted line waits to be written while events flow (lines are written in batches). */
    static final long WRITE_NANOS = 10_000_000;
    /** Empty looks before the writer parks until an event wakes it (48 ms without an event). */
    static final int IDLE_POLLS = 12;
    /** Characters formatted before a batch is written out. */
    static final int BATCH_CHARS = 1 << 16;
    private static final TraceRecord END = new TraceRecord("", "", null, "", false, 0, 0);

    private final PrintStream out;
    private final Queue<TraceRecord> queue = new ConcurrentLinkedQueue<>();
    private final Thread thread;
    /** Records handed over (the emulating thread's own count). */
    private long handedOver;
    /** Records the writer has taken from the queue (written by the writer only, once per batch). */
    private volatile long taken;
    /** The writer is parked (or about to park) until an event arrives. */
    private volatile boolean parked;
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
        while (handedOver - taken >= CAPACITY) {     // the output is slower than the guest: wait for it
            if (failure != null || !thread.isAlive()) return;
            wake();
            LockSupport.parkNanos(POLL_NANOS / 10);
        }
        hand(r);
    }

    private void hand(TraceRecord r) {
        queue.offer(r);
        handedOver++;
        if (parked) wake();
    }

    private void wake() {
        parked = false;
        LockSupport.unpark(thread);
    }

    private void write() {
        StringBuilder sb = new StringBuilder(BATCH_CHARS + 4096);
        try {
            int idle = 0;
            long pendingSince = 0;      // when the oldest line not yet written was formatted
            while (true) {
                TraceRecord r = queue.poll();
                if (r == null) {
                    if (!sb.isEmpty() && (idle >= IDLE_POLLS || System.nanoTime() - pendingSince >= WRITE_NANOS)) {
                        writeOut(sb);
                        out.flush();
                    }
                    if (idle++ < IDLE_POLLS) {
                        LockSupport.parkNanos(POLL_NANOS);
                    } else {
                        parked = true;                       // then look once more: an event handed
                        if (queue.isEmpty()) LockSupport.park(this);   // over before this sees the flag
                        parked = false;
                    }
                    continue;
                }
                idle = 0;
                if (sb.isEmpty()) pendingSince = System.nanoTime();
                long n = 0;
                for (; r != null; r = queue.poll()) {
                    if (r == END) {
                        taken += n;
                        writeOut(sb);
                        return;
                    }
                    r.appendLine(sb).append('\n');
                    n++;
                    if (sb.length() >= BATCH_CHARS) {
                        writeOut(sb);
                        taken += n;         // the emulating side, held at the bound, goes on
                        n = 0;
                        pendingSince = System.nanoTime();
                    }
                }
                taken += n;
            }
        } catch (Throwable t) {
            failure = t;
            queue.clear();
        }
    }

    /** The batch's characters and bytes, kept from batch to batch (a fresh String and byte array a batch cost the writer a fifth of its time). */
    private char[] chars = new char[0];
    private byte[] bytes = new byte[0];

    /**
     * The lines in {@code sb} as the guest's bytes, then {@code sb} emptied: ASCII text (nearly
     * every batch) a byte a char, anything else through {@link GuestText#encode} (surrogate escapes
     * included).
     */
    private void writeOut(StringBuilder sb) {
        int n = sb.length();
        if (n == 0) return;
        if (chars.length < n) {
            chars = new char[Math.max(n, 2 * chars.length)];
            bytes = new byte[chars.length];
        }
        sb.getChars(0, n, chars, 0);
        sb.setLength(0);
        char[] c = chars;
        byte[] b = bytes;
        int i = 0;
        for (; i < n; i++) {
            char ch = c[i];
            if (ch >= 0x80) break;
            b[i] = (byte) ch;
        }
        if (i == n) {
            out.write(b, 0, n);
            return;
        }
        byte[] encoded = GuestText.encode(new String(c, 0, n));
        out.write(encoded, 0, encoded.length);
    }

    /** Writes every event handed over and stops the thread; the output is flushed, not closed. */
    @Override
    public void close() {
        if (closed) return;
        closed = true;
        if (failure == null) hand(END);
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
