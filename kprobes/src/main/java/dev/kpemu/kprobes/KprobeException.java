package dev.kpemu.kprobes;

/** A kprobes call failed the way the kernel's would, with {@link #errno()} (returned negated by the kernel). */
public final class KprobeException extends RuntimeException {
    private final Errno errno;

    public KprobeException(Errno errno, String message) {
        super(errno + ": " + message);
        this.errno = errno;
    }

    public Errno errno() { return errno; }

    /** The kernel's return value: {@code -errno}. */
    public int kernelReturn() { return -errno.value(); }
}
