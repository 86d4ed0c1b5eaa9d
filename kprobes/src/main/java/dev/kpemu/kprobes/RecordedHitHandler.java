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

    /** The hit, read back in order before the machine's other code sees the guest again. */
    void onRecordedHit(Kprobe k, RecordedHit hit);
}
