package dev.kpemu.api;

import dev.kpemu.boot.BootOutcome;

/**
 * How a {@link KpemuSession} ended. The {@code kpemu} command maps the same endings to its exit
 * codes (docs/reference.md, "Commands"); a Java program chooses its own.
 */
public enum Outcome {
    /** The guest powered off (or reset) by itself: the normal end of a command or workload. */
    POWERED_OFF,
    /** The guest stopped with a kernel panic or a fault it could not handle. */
    GUEST_FAILED,
    /** The guest-time limit ({@link KpemuSession.Builder#timeout}) was reached first. */
    TIMEOUT,
    /** The session was stopped ({@link ProbeContext#stopGuest}, {@link KpemuSession#stop}). */
    STOPPED,
    /** A kprobe_events definition was refused (before boot, or when registered), as Linux would refuse it. */
    REJECTED;

    /** The session's outcome for a boot that ended this way. */
    static Outcome of(BootOutcome boot) {
        return switch (boot) {
            case POWERED_OFF -> POWERED_OFF;
            case GUEST_FAILED -> GUEST_FAILED;
            case TIMEOUT -> TIMEOUT;
            case STOPPED -> STOPPED;
        };
    }
}
