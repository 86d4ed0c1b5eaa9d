package dev.kpemu.kprobes.events;

/** The errno values a write to {@code kprobe_events} can fail with (asm-generic numbering, same on x86-64 and arm64). */
public enum Errno {
    ENOENT(2), E2BIG(7), ENOMEM(12), EBUSY(16), EEXIST(17), EINVAL(22), EILSEQ(84), EADDRNOTAVAIL(99);

    private final int value;

    Errno(int value) { this.value = value; }

    /** The positive errno number ({@code write(2)} returns its negation). */
    public int value() { return value; }
}
