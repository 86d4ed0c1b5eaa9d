package dev.kpemu.machine;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import java.util.PriorityQueue;

/**
 * Guest time derived from executed instructions, never from host wall time: two runs of the
 * same workload see the same time. One instruction takes {@code nanosPerInstruction}
 * nanoseconds of guest time (a fixed, nominal guest speed). Idle (HLT/WFI) jumps the clock
 * forward to the next timer event.
 */
public final class VirtualClock {
    /** A callback due at a guest time. */
    public interface Event { void fire(long nowNanos); }

    private record Scheduled(long dueNanos, long seq, Event event) implements Comparable<Scheduled> {
        public int compareTo(Scheduled o) {
            int c = Long.compare(dueNanos, o.dueNanos);
            return c != 0 ? c : Long.compare(seq, o.seq);
        }
    }

    private final double nanosPerInstruction;
    private long instructions;
    private long idleNanos;
    private long seq;
    private final PriorityQueue<Scheduled> events = new PriorityQueue<>();
    private java.util.function.LongSupplier pendingInstructions = () -> 0;
    private java.util.function.LongConsumer onSchedule;

    /** @param instructionsPerSecond nominal guest speed (e.g. 1e9 = one instruction per ns) */
    public VirtualClock(long instructionsPerSecond) {
        if (instructionsPerSecond <= 0) throw new IllegalArgumentException("instructionsPerSecond must be positive");
        this.nanosPerInstruction = 1e9 / instructionsPerSecond;
    }

    public long instructions() { return instructions; }

    /** Idle time (HLT/WFI jumps to the next event) so far, in nanoseconds. */
    public long idleNanos() { return idleNanos; }

    /** Nanoseconds per instruction at the nominal speed. */
    public double nanosPerInstruction() { return nanosPerInstruction; }

    /** Guest time in nanoseconds since power-on. */
    public long nanos() { return (long) (instructions * nanosPerInstruction) + idleNanos; }

    /**
     * Guest time including the instructions the current slice has executed so far (exact to the
     * block, from the machine's instruction clock): what a device register read mid-slice sees.
     * Between slices it equals {@link #nanos()}.
     */
    public long liveNanos() {
        return (long) ((instructions + pendingInstructions.getAsLong()) * nanosPerInstruction) + idleNanos;
    }

    /**
     * {@link #liveNanos} at the point of the running slice where it had executed {@code pending}
     * instructions (a hit recorded natively, read back before the slice is charged).
     */
    public long liveNanosAt(long pending) {
        return (long) ((instructions + pending) * nanosPerInstruction) + idleNanos;
    }

    /** The machine tells the clock how far the running slice has got (see {@link #liveNanos}). */
    void setPendingInstructions(java.util.function.LongSupplier s) { this.pendingInstructions = s; }

    /** The machine hears of every newly scheduled event (to cut a running slice short for it). */
    void setScheduleListener(java.util.function.LongConsumer l) { this.onSchedule = l; }

    /** Instructions from the live time until {@code dueNanos} (at least 1). */
    long instructionsUntil(long dueNanos) {
        long dn = dueNanos - liveNanos();
        return dn <= 0 ? 1 : Math.max(1, (long) Math.ceil(dn / nanosPerInstruction));
    }

    /**
     * Guest time in instruction periods (idle time converted at the nominal speed): the x86 time
     * stamp counter, which ticks at the nominal instruction rate.
     */
    public long ticks() { return instructions + Math.round(idleNanos / nanosPerInstruction); }

    /** Charges executed instructions. */
    public void advance(long executedInstructions) {
        if (executedInstructions < 0) throw new IllegalArgumentException("negative instruction count");
        instructions += executedInstructions;
    }

    /** Schedules {@code e} at absolute guest time {@code dueNanos}; returns a handle for {@link #cancel}. */
    public Object schedule(long dueNanos, Event e) {
        Scheduled s = new Scheduled(dueNanos, seq++, e);
        events.add(s);
        if (onSchedule != null) onSchedule.accept(dueNanos);
        return s;
    }

    public void cancel(Object handle) {
        if (handle != null) events.remove(handle);
    }

    /** Instructions until the next event (Long.MAX_VALUE if none). */
    public long instructionsUntilNextEvent() {
        Scheduled s = events.peek();
        if (s == null) return Long.MAX_VALUE;
        long dn = s.dueNanos() - nanos();
        if (dn <= 0) return 0;
        return Math.max(1, (long) Math.ceil(dn / nanosPerInstruction));
    }

    public boolean hasEvents() { return !events.isEmpty(); }

    /** Fires every event that is due now. */
    public void fireDue() {
        long now = nanos();
        Scheduled s;
        while ((s = events.peek()) != null && s.dueNanos() <= now) {
            events.poll();
            s.event().fire(now);
            now = nanos();
        }
    }

    // ------------------------------------------------------------------ snapshots

    /**
     * Writes the clock's own state (instructions, idle time, the event sequence counter). The
     * events themselves belong to the parts that scheduled them ({@link #writeEvent}).
     */
    public void saveState(DataOutput out) throws IOException {
        out.writeLong(instructions);
        out.writeLong(idleNanos);
        out.writeLong(seq);
    }

    /**
     * Reads the state {@link #saveState} wrote and drops every scheduled event: the machine's
     * parts schedule theirs again as they restore ({@link #readEvent}).
     */
    public void restoreState(DataInput in) throws IOException {
        long i = in.readLong(), idle = in.readLong(), s = in.readLong();
        if (i < 0 || idle < 0 || s < 0) throw new IOException("clock state out of range");
        instructions = i;
        idleNanos = idle;
        seq = s;
        events.clear();
    }

    /** Writes a scheduled event's handle (null or already fired/cancelled: none): its due time and order. */
    public void writeEvent(DataOutput out, Object handle) throws IOException {
        boolean live = handle instanceof Scheduled s && events.contains(s);
        out.writeBoolean(live);
        if (!live) return;
        Scheduled s = (Scheduled) handle;
        out.writeLong(s.dueNanos());
        out.writeLong(s.seq());
    }

    /** Schedules {@code e} as the handle {@link #writeEvent} wrote (same due time and order); null when none was. */
    public Object readEvent(DataInput in, Event e) throws IOException {
        if (!in.readBoolean()) return null;
        long due = in.readLong(), s = in.readLong();
        if (s < 0 || s >= seq) throw new IOException("clock event order out of range");
        Scheduled sc = new Scheduled(due, s, e);
        events.add(sc);
        return sc;
    }

    /** Idles: moves time to the next event (if any) and fires it; returns false when nothing is scheduled. */
    public boolean idleToNextEvent() {
        Scheduled s = events.peek();
        if (s == null) return false;
        long now = nanos();
        if (s.dueNanos() > now) idleNanos += s.dueNanos() - now;
        fireDue();
        return true;
    }
}
