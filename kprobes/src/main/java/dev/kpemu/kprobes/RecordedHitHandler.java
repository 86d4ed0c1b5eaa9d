package dev.kpemu.kprobes;

/**
 * A pre handler whose hits the machine's native code may record at the {@code int3} and hand back
 * later ({@link RecordedHit}): one that reads the hit's registers and the words the engine was told
 * to capture ({@link Kprobes#recordHitsWith}), writes nothing, and returns 0. The engine records a
 * probe's hits natively only while every enabled probe at its address has such a handler that
 * says {@link #recordable()} (x86-64 ftrace sites, arm64 breakpoints: {@link RecordedHits}); otherwise the
 * hit takes the ordinary path and the probe's {@link Kprobe#preHandler()} runs at the hit.
 */
public interface RecordedHitHandler {
    /**
     * Whether this handler's hits may be recorded now. The engine asks again after every change
     * it is told of ({@link Kprobes#recordedHitsChanged()}): a handler whose answer can change
     * says so then.
     */
    boolean recordable();

    /**
     * The guest memory this handler reads at each hit of {@code k}, besides the words, for the
     * machine's native code to read at the hit into the record ({@link RecordedHit#readAt}), with
     * registers numbered as {@code layout}'s ({@link RecordedHit#registerIndex}): empty (the
     * default) when it reads none; null when it reads memory that cannot be planned so (then its
     * hits take the ordinary path). A point whose enabled probes read memory is recorded only when
     * it has one enabled probe. Asked at each safe point that builds the site table.
     */
    default dev.kpemu.machine.RecordedProbeHits.Read[] memoryReads(Kprobe k, RecordedHit layout) { return NO_READS; }

    /** No read of guest memory. */
    dev.kpemu.machine.RecordedProbeHits.Read[] NO_READS = new dev.kpemu.machine.RecordedProbeHits.Read[0];

    /** The hit, read back in order before the machine's other code sees the guest again. */
    void onRecordedHit(Kprobe k, RecordedHit hit);

    /**
     * The format of the trace line the machine's native code may write for this handler's hits
     * of {@code k} ({@link RecordedHit#lineLength()}), whose records are laid out as {@code layout}'s
     * ({@link RecordedHit#registerIndex}); null (the default): none. Asked at each safe point that
     * builds the site table, for a point whose only enabled probe is {@code k}.
     */
    default byte[] lineFormat(Kprobe k, RecordedHit layout) { return null; }

    /**
     * A hit whose record may carry its line ({@link RecordedHit#lineLength()} above 0), which this
     * handler may take instead of making its own; by default it is read as any other.
     */
    default void onRecordedLine(Kprobe k, RecordedHit hit) { onRecordedHit(k, hit); }

    /**
     * Where hits of {@code k} whose native line is complete (its context columns written, its
     * timestamp the hit's guest time) may go as text without a call per hit, exactly as
     * {@link #onRecordedLine} would hand the line over: until the engine is next told of a change
     * ({@link Kprobes#recordedHitsChanged()}), after which every hit comes through
     * {@link #onRecordedLine} again until the next table. Null (the default): each through
     * {@link #onRecordedLine}. Asked at each safe point that builds the site table, for a point
     * whose only enabled probe is {@code k} and that has a {@link #lineFormat}.
     */
    default RecordedLineSink lineSink(Kprobe k) { return null; }

    /** {@code n} hits of {@code k} whose lines went to its {@link #lineSink}: counted as {@link #onRecordedLine} counts them. */
    default void onRecordedLines(Kprobe k, int n) {}
}
