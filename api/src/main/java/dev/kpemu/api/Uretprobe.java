package dev.kpemu.api;

import java.util.Objects;
import java.util.function.Consumer;

/**
 * A return probe on a function of a guest file ({@link KpemuSession.Builder#uretprobe}): the
 * handler runs when the function entered at {@code offset} returns, with the return-time
 * registers ({@link UprobeHit#returnValue}) and the fetch arguments ({@code $retval}...).
 */
public final class Uretprobe extends UserProbe {
    private Uretprobe(String path, long offset) { super(path, offset); }

    /** A return probe on the function at {@code offset} in {@code path}. */
    public static Uretprobe on(String path, long offset) { return new Uretprobe(path, offset); }

    /** Fetch arguments in {@code uprobe_events}' syntax, evaluated at the return. */
    public Uretprobe fetch(String... args) { addFetchArgs(args); return this; }

    /** The handler run at each return; one that throws is a {@link HandlerFailure}, the guest goes on. */
    public Uretprobe handler(Consumer<UprobeHit> h) { this.handler = Objects.requireNonNull(h); return this; }

    @Override boolean isReturn() { return true; }
}
