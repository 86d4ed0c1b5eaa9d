package dev.kpemu.kprobes;

/**
 * A return probe ({@code struct kretprobe}): an entry probe that swaps the return address for a
 * trampoline, so {@link #handler()} runs when the function returns. Up to {@link #maxactive()}
 * invocations are tracked at once; more count in {@link #nmissed()}.
 */
public final class Kretprobe implements Probe {
    /** {@code entry_handler} / {@code handler}: the entry handler's non-zero return skips this invocation. */
    @FunctionalInterface
    public interface Handler { int handle(KretprobeInstance ri, Regs regs); }

    /** {@code KRETPROBE_MAX_DATA_SIZE}. */
    public static final int MAX_DATA_SIZE = 4096;

    final Kprobe kp;
    private Handler handler;
    private Handler entryHandler;
    private int maxactive;
    private int dataSize;
    volatile long nmissed;

    private Kretprobe(Kprobe spec) { this.kp = Kprobe.forKretprobe(spec, this); }

    /** A return probe on the function at {@code address}. */
    public static Kretprobe at(long address) { return new Kretprobe(Kprobe.at(address)); }

    /** A return probe on {@code symbol} (+ {@code offset}, which must keep it at the function entry). */
    public static Kretprobe at(String symbol, long offset) { return new Kretprobe(Kprobe.at(symbol, offset)); }

    public static Kretprobe at(String symbol) { return at(symbol, 0); }

    public Kretprobe handler(Handler h) { this.handler = h; return this; }

    public Kretprobe entryHandler(Handler h) { this.entryHandler = h; return this; }

    /** Instances that can be outstanding at once; {@code <= 0} means the kernel default max(10, 2 × CPUs). */
    public Kretprobe maxactive(int n) { this.maxactive = n; return this; }

    /** Bytes of per-instance scratch ({@code ri->data}). */
    public Kretprobe dataSize(int n) { this.dataSize = n; return this; }

    public Handler handler() { return handler; }

    private RecordedReturnHandler recordedReturnHandler;

    /**
     * Lets the machine's native code record this kretprobe's returns at the trampoline and hand
     * them to {@code h} later ({@link RecordedReturnHandler}); {@code h} does what the handler does,
     * from the record.
     */
    public Kretprobe recordedReturns(RecordedReturnHandler h) { this.recordedReturnHandler = h; return this; }

    /** The handler of recorded returns, or null: every return runs {@link #handler()} at the trampoline. */
    public RecordedReturnHandler recordedReturnHandler() { return recordedReturnHandler; }

    public Handler entryHandler() { return entryHandler; }

    public int maxactive() { return maxactive; }

    void setMaxactive(int n) { this.maxactive = n; }

    public int dataSize() { return dataSize; }

    /** Its entry kprobe ({@code rp->kp}). */
    public Kprobe kprobe() { return kp; }

    @Override
    public Kprobe entryProbe() { return kp; }

    @Override
    public long missed() { return kp.nmissed() + nmissed; }

    /** Entries that found no free instance. */
    public long nmissed() { return nmissed; }

    @Override
    public String toString() { return "kretprobe[" + kp + "]"; }
}
