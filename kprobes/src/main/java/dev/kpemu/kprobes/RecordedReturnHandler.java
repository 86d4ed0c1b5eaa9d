package dev.kpemu.kprobes;

/**
 * A kretprobe's return handler whose returns the machine's native code may record at the
 * trampoline and hand back later ({@link RecordedHit}), as {@link RecordedHitHandler} does for
 * entries: one that reads the return's registers and the captured words, no other guest memory,
 * writes nothing and returns 0. The native code records a return when its frame has exactly one
 * outstanding instance, of a kretprobe whose handler says {@link #returnRecordable()}; otherwise
 * the return takes the ordinary path and {@link Kretprobe#handler()} runs at the trampoline.
 */
public interface RecordedReturnHandler {
    /**
     * Whether this handler's returns may be recorded now; asked again after every change the
     * engine is told of ({@link Kprobes#recordedHitsChanged()}).
     */
    boolean returnRecordable();

    /**
     * The return of {@code ri}, read back in order: what {@link Kretprobe#handler()} does, from the
     * record ({@code hit.regs()}: the registers at the trampoline, the ip the real return address).
     */
    void onRecordedReturn(KretprobeInstance ri, RecordedHit hit);

    /**
     * The format of the trace line the native code may write for {@code rp}'s recorded returns, as
     * {@link RecordedHitHandler#lineFormat} is an entry's, with an empty head: the native code
     * writes the head told for the return address ({@link RecordedHit#keepReturnHead}); null (the
     * default): none. Asked at each safe point that builds the site table.
     */
    default byte[] returnLineFormat(Kretprobe rp, RecordedHit layout) { return null; }

    /**
     * Where {@code rp}'s returns whose native line is complete may go as text, as
     * {@link RecordedHitHandler#lineSink} is an entry's; null (the default): each through
     * {@link #onRecordedReturn}.
     */
    default RecordedLineSink returnLineSink(Kretprobe rp) { return null; }

    /** {@code n} returns of {@code rp} whose lines went to its {@link #returnLineSink}: counted as {@link #onRecordedReturn} counts them. */
    default void onRecordedReturnLines(Kretprobe rp, int n) {}
}
