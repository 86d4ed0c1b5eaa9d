package dev.kpemu.kprobes;

/**
 * Where the trace lines the machine's native code formatted go as text, several hits' at once,
 * with no call per hit ({@link RecordedHitHandler#lineSink}): the engine hands over each run of
 * consecutive records whose lines it may pass on unread, then counts each probe's hits
 * ({@link RecordedHitHandler#onRecordedLines}).
 */
public interface RecordedLineSink {
    /**
     * Whole trace lines, each followed by its newline: {@code text[offset, offset + length)}, valid
     * during the call only, in the order of their hits.
     */
    void acceptLines(byte[] text, int offset, int length);
}
