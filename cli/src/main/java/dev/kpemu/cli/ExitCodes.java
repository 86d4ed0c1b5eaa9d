package dev.kpemu.cli;

import dev.kpemu.boot.BootOutcome;

/** The exit codes of every kpemu command, in one place. */
public final class ExitCodes {
    private ExitCodes() {}

    /** Success; for boot: the guest powered off cleanly. */
    public static final int OK = 0;
    /** An error (message on stderr): missing or corrupt image, engine failure, I/O. */
    public static final int ERROR = 1;
    /** Bad usage or a bad probe definition. */
    public static final int USAGE = 2;
    /** The guest panicked or hit a fault it could not handle. */
    public static final int GUEST_PANIC = 3;
    /** The guest did not finish within the timeout. */
    public static final int TIMEOUT = 4;
    /**
     * The trace differs from the expected one ({@code kpemu compare}, {@code kpemu boot --expect}):
     * the guest ran, the comparison was made, and it found a difference (the diff is printed).
     */
    public static final int TRACE_DIFFERS = 5;
    /**
     * {@code kpemu boot --snapshot-file}: the snapshot file is corrupt, truncated, or was taken of
     * another boot (kernel, initramfs, command line, memory, machine or kpemu build); nothing ran.
     */
    public static final int SNAPSHOT_REFUSED = 6;

    /**
     * The exit code of {@code kpemu boot} (and of the other commands that boot) for how the boot
     * ended: powered off 0, guest panic or fault 3, guest-time limit 4, stopped by the host 1.
     */
    public static int of(BootOutcome outcome) {
        return switch (outcome) {
            case POWERED_OFF -> OK;
            case GUEST_FAILED -> GUEST_PANIC;
            case TIMEOUT -> TIMEOUT;
            case STOPPED -> ERROR;
        };
    }
}
