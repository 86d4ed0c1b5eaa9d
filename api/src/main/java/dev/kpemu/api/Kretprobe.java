package dev.kpemu.api;

import java.util.Objects;

/**
 * A return probe with Java handlers ({@code struct kretprobe}): {@link #entry} runs when the
 * function is entered, {@link #ret} when it returns; the two share per-invocation data
 * ({@link ProbeContext#setData}, {@code ri->data}), as in {@code samples/kprobes/kretprobe_example.c}.
 */
public final class Kretprobe implements Probe {
    private final String symbol;
    ProbeHandler entry, ret;
    int maxactive;
    dev.kpemu.kprobes.Kretprobe engine;
    volatile long hits;

    private Kretprobe(String symbol) { this.symbol = symbol; }

    /** A return probe on the function {@code symbol}. */
    public static Kretprobe on(String symbol) { return new Kretprobe(Objects.requireNonNull(symbol)); }

    /** The entry handler ({@code entry_handler}); {@link ProbeContext#skipInstance} leaves an invocation untracked. */
    public Kretprobe entry(ProbeHandler h) { this.entry = h; return this; }

    /** The return handler ({@code handler}). */
    public Kretprobe ret(ProbeHandler h) { this.ret = h; return this; }

    /** Invocations tracked at once ({@code maxactive}); 0: the kernel's default. */
    public Kretprobe maxactive(int n) { this.maxactive = n; return this; }

    @Override public String symbol() { return symbol; }

    @Override public long offset() { return 0; }

    @Override public long address() {
        dev.kpemu.kprobes.Kretprobe e = engine;
        return e == null ? 0 : e.kprobe().address();
    }

    @Override public long hits() { return hits; }

    @Override public long missed() {
        dev.kpemu.kprobes.Kretprobe e = engine;
        return e == null ? 0 : e.nmissed() + e.kprobe().nmissed();
    }

    @Override public boolean isRegistered() {
        dev.kpemu.kprobes.Kretprobe e = engine;
        return e != null && e.kprobe().isRegistered();
    }

    /** The engine's kretprobe, null until registered. */
    public dev.kpemu.kprobes.Kretprobe engineProbe() { return engine; }

    @Override public String toString() { return "kretprobe " + symbol; }
}
