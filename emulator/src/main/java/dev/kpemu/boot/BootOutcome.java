package dev.kpemu.boot;

/**
 * How a boot ended ({@link BootRunner.Result#outcome()}). What each ending means to a caller is
 * the caller's business: the CLI maps it to its exit codes, the Java API to its own outcome.
 */
public enum BootOutcome {
    /** The guest powered off or reset by itself: the normal end of a workload. */
    POWERED_OFF,
    /** A kernel panic, or a fault or halt the guest could not come back from. */
    GUEST_FAILED,
    /** The guest-time limit came first. */
    TIMEOUT,
    /** The host stopped the run (a handler, another thread, a signal). */
    STOPPED
}
