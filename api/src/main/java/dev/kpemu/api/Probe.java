package dev.kpemu.api;

/**
 * A probe with Java handlers, registered through {@link KpemuSession#register}: a {@link Kprobe}
 * (any instruction, handlers before and after it) or a {@link Kretprobe} (a function's entry and
 * return). Linux's {@code register_kprobe} / {@code register_kretprobe} rules apply: a place the
 * kernel refuses makes registration throw {@link dev.kpemu.kprobes.KprobeException} with its errno.
 */
public sealed interface Probe permits Kprobe, Kretprobe {
    /** The probed symbol, or null for a probe given by address. */
    String symbol();

    /** The offset from {@link #symbol()} (0 for a kretprobe). */
    long offset();

    /** The probed address: as given, or the kernel's canonical one once registered. */
    long address();

    /** Handler runs so far: entries for a {@link Kprobe}, returns for a {@link Kretprobe}. */
    long hits();

    /**
     * Hits that ran no handler ({@code nmissed}): reentry for a kprobe, and for a kretprobe also
     * entries that found no free instance ({@link Kretprobe#maxactive}).
     */
    long missed();

    /** Whether the probe is registered in the running session. */
    boolean isRegistered();
}
