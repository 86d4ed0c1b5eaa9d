package dev.kpemu.kprobes;

/**
 * What the engine registers: a {@link Kprobe}, or a {@link Kretprobe} (a kprobe on a function's
 * entry that also catches its return). {@link Kprobes#register(Probe)} and friends take either.
 */
public sealed interface Probe permits Kprobe, Kretprobe {

    /** The kprobe that is hit: the probe itself, or a kretprobe's entry probe ({@code rp->kp}). */
    Kprobe entryProbe();

    /** True while registered. */
    default boolean isRegistered() { return entryProbe().isRegistered(); }

    /**
     * Hits that ran no handler, as {@code kprobe_profile} counts them: a kprobe's
     * {@code kp->nmissed}; for a kretprobe {@code rp->kp.nmissed + rp->nmissed} (entries that found
     * no free instance too).
     */
    long missed();
}
