package dev.kpemu.api;

import java.util.Objects;

/**
 * A kprobe with Java handlers ({@code struct kprobe}): {@link #pre} runs before the probed
 * instruction, {@link #post} after it (as {@code samples/kprobes/kprobe_example.c}).
 *
 * <pre>{@code
 * Kprobe p = Kprobe.on("kernel_clone")
 *         .pre(ctx -> System.out.printf("pre: ip = %x%n", ctx.ip()))
 *         .post(ctx -> System.out.printf("post: ip = %x%n", ctx.ip()));
 * }</pre>
 */
public final class Kprobe implements Probe {
    private final String symbol;
    private final long offset;
    private final long requestedAddress;
    ProbeHandler pre, post;
    /** The engine's probe while registered. */
    dev.kpemu.kprobes.Kprobe engine;
    volatile long hits;

    private Kprobe(String symbol, long offset, long address) {
        this.symbol = symbol;
        this.offset = offset;
        this.requestedAddress = address;
    }

    /** A probe at {@code symbol}'s first instruction. */
    public static Kprobe on(String symbol) { return on(symbol, 0); }

    /** A probe at {@code symbol + offset} ({@code .symbol_name}, {@code .offset}). */
    public static Kprobe on(String symbol, long offset) { return new Kprobe(Objects.requireNonNull(symbol), offset, 0); }

    /** A probe at a kernel address ({@code .addr}). */
    public static Kprobe at(long address) { return new Kprobe(null, 0, address); }

    /**
     * A jprobe-style entry probe: at each hit, {@code args} is a new {@code type} whose
     * components are the function's parameters — matched by name from the kernel's BTF when it
     * has the function's prototype, else by position. Component types: {@code long}, {@code int},
     * {@code short}, {@code byte}, {@code boolean}, {@code String} (the pointed-to string read as
     * kprobe_events' {@code :string} reads it; null on a fault).
     */
    public static <A extends Record> Kprobe typed(String function, Class<A> type, TypedHandler<A> handler) {
        ArgumentBinder<A> binder = new ArgumentBinder<>(function, type);
        return on(function).pre(ctx -> handler.handle(ctx, binder.bind(ctx)));
    }

    /** The handler run before the probed instruction ({@code pre_handler}). */
    public Kprobe pre(ProbeHandler h) { this.pre = h; return this; }

    /** The handler run after the probed instruction ({@code post_handler}). */
    public Kprobe post(ProbeHandler h) { this.post = h; return this; }

    @Override public String symbol() { return symbol; }

    @Override public long offset() { return offset; }

    @Override public long address() {
        dev.kpemu.kprobes.Kprobe e = engine;
        return e != null ? e.address() : requestedAddress;
    }

    @Override public long hits() { return hits; }

    @Override public long missed() {
        dev.kpemu.kprobes.Kprobe e = engine;
        return e == null ? 0 : e.nmissed();
    }

    @Override public boolean isRegistered() {
        dev.kpemu.kprobes.Kprobe e = engine;
        return e != null && e.isRegistered();
    }

    /** The engine's probe (flags, {@code kprobes/list}), null until registered. */
    public dev.kpemu.kprobes.Kprobe engineProbe() { return engine; }

    @Override public String toString() {
        return symbol != null ? "kprobe " + symbol + (offset == 0 ? "" : "+0x" + Long.toHexString(offset)) : "kprobe 0x" + Long.toHexString(requestedAddress);
    }
}
