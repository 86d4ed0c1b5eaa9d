package dev.kpemu.api;

import java.util.Objects;
import java.util.function.Consumer;

/**
 * A data watchpoint of a session ({@link KpemuSession.Builder#watch}): the guest's reads and/or
 * writes of {@code length} bytes at a kernel symbol ({@code "jiffies"}, {@code "init_task+0x5c0"})
 * or a kernel-virtual address ({@code "0xffffffff82a079c0"}), on every CPU, outside the guest (its
 * debug registers stay its own), any length. The address is resolved through kallsyms and
 * translated through the guest's page tables when the session becomes ready (the probes'
 * registration point); the watch then follows that physical memory.
 *
 * <pre>{@code
 * Watchpoint.on("jiffies", 8).writes().handler(a -> System.out.println(a.ip() + " " + a.newValue()))
 * }</pre>
 */
public final class Watchpoint {
    private final String place;
    private final long length;
    private boolean reads, writes;
    private Consumer<WatchAccess> handler = a -> { };

    private Watchpoint(String place, long length) {
        this.place = Objects.requireNonNull(place);
        if (length < 1) throw new IllegalArgumentException("a watchpoint is at least 1 byte long, not " + length);
        this.length = length;
    }

    /** Watches {@code length} bytes at {@code symbolOrAddress} ({@code SYM}, {@code SYM+OFFS}, {@code SYM-OFFS} or an address). */
    public static Watchpoint on(String symbolOrAddress, long length) { return new Watchpoint(symbolOrAddress, length); }

    /** Reports the guest's loads (with {@link #writes()}: both; an instruction that loads and stores it is one hit, a store). */
    public Watchpoint reads() { reads = true; return this; }

    /** Reports the guest's stores (with {@link #reads()}: both); the default when neither is asked. */
    public Watchpoint writes() { writes = true; return this; }

    /**
     * Runs {@code h} on the emulation thread for each access, inside the engine's memory callback:
     * it may read guest memory and {@link WatchAccess#stopGuest} the guest, not run it or change
     * watches. A handler that throws is a {@link HandlerFailure}; the guest goes on.
     */
    public Watchpoint handler(Consumer<WatchAccess> h) { this.handler = Objects.requireNonNull(h); return this; }

    public String place() { return place; }

    public long length() { return length; }

    public boolean watchesReads() { return reads; }

    public boolean watchesWrites() { return writes || !reads; }

    Consumer<WatchAccess> handlerFn() { return handler; }

    @Override public String toString() {
        return (watchesReads() && watchesWrites() ? "rw" : watchesReads() ? "r" : "w") + "@" + place + ":" + length;
    }
}
