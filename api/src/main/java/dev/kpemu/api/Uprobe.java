package dev.kpemu.api;

import java.util.Objects;
import java.util.function.Consumer;

/**
 * A uprobe with a Java handler ({@link KpemuSession.Builder#uprobe}): every process that maps
 * the file, from the session's registration point on, as Linux's {@code uprobe_events}. The
 * handler runs on the emulation thread at each hit, with the user registers and the fetch
 * arguments' values.
 *
 * <pre>{@code
 * Uprobe.on("/bin/busybox", 0xebf0).fetch("%sp", "+0(+8(%sp)):string")
 *         .handler(h -> System.out.println(h.comm() + " " + h.arg("arg2")));
 * }</pre>
 */
public final class Uprobe extends UserProbe {
    private Uprobe(String path, long offset) { super(path, offset); }

    /** A probe at {@code offset} in {@code path} (a guest path, as {@code PATH:OFFSET}). */
    public static Uprobe on(String path, long offset) { return new Uprobe(path, offset); }

    /** Fetch arguments in {@code uprobe_events}' syntax, named {@code arg1}... unless given {@code NAME=}. */
    public Uprobe fetch(String... args) { addFetchArgs(args); return this; }

    /** The handler run at each hit; one that throws is a {@link HandlerFailure}, the guest goes on. */
    public Uprobe handler(Consumer<UprobeHit> h) { this.handler = Objects.requireNonNull(h); return this; }

    @Override boolean isReturn() { return false; }
}
