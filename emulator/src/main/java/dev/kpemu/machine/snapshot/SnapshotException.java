package dev.kpemu.machine.snapshot;

/**
 * A snapshot could not be written or read: the file is corrupt or truncated, or was taken of
 * another machine (another kernel, initramfs, command line, memory size or kpemu build). The
 * message is one line, for the user.
 */
public final class SnapshotException extends Exception {
    /** Why a snapshot was refused. */
    public enum Kind { CORRUPT, OTHER_MACHINE, IO }

    private final Kind kind;

    public SnapshotException(Kind kind, String message) {
        super(message);
        this.kind = kind;
    }

    public SnapshotException(Kind kind, String message, Throwable cause) {
        super(message, cause);
        this.kind = kind;
    }

    public Kind kind() { return kind; }
}
