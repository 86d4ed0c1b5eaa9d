package dev.kpemu.api;

/**
 * How a {@link KpemuSession} ended. {@link #exitCode()} is the code {@code kpemu boot} exits with
 * for the same ending (the CLI's {@code ExitCodes}).
 */
public enum Outcome {
    /** The guest powered off (or reset) by itself: the normal end of a command or workload. */
    POWERED_OFF(0),
    /** The guest stopped with a kernel panic or a fault it could not handle. */
    GUEST_FAILED(3),
    /** The guest-time limit ({@link KpemuSession.Builder#timeout}) was reached first. */
    TIMEOUT(4),
    /** The session was stopped ({@link ProbeContext#stopGuest}, {@link KpemuSession#stop}). */
    STOPPED(1),
    /** A kprobe_events definition was refused (before boot, or when registered), as Linux would refuse it. */
    REJECTED(2);

    private final int exitCode;

    Outcome(int exitCode) { this.exitCode = exitCode; }

    /** The exit code of {@code kpemu boot} for this ending (0, 1, 2, 3 or 4). */
    public int exitCode() { return exitCode; }
}
