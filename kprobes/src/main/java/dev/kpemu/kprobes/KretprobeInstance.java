package dev.kpemu.kprobes;

/**
 * One tracked invocation of a kretprobed function ({@code struct kretprobe_instance}): the real
 * return address, the stack frame it belongs to and {@code dataSize} bytes of scratch shared by
 * the entry and return handlers.
 */
public final class KretprobeInstance {
    volatile Kretprobe rp;
    long retAddr;
    long frame;
    /** The task that entered ({@code current}), 0 when unknown. */
    long task;
    /** Its slot in the native code's table of outstanding instances (RecordedHits), -1: none. */
    int nativeSlot = -1;
    private final byte[] data;

    KretprobeInstance(Kretprobe rp) {
        this.rp = rp;
        this.data = new byte[rp.dataSize()];
    }

    /** The probe, or null once it was unregistered while this invocation was outstanding. */
    public Kretprobe kretprobe() { return rp; }

    /** The real return address (never the trampoline). */
    public long returnAddress() { return retAddr; }

    /** The frame key matched at return: x86 the stack slot of the return address, arm64 the caller's x29. */
    public long frame() { return frame; }

    /** The task ({@code struct task_struct *}) that entered the function, 0 when unknown. */
    public long task() { return task; }

    /** {@code ri->data}: {@link Kretprobe#dataSize()} bytes, kept from entry to return. */
    public byte[] data() { return data; }
}
