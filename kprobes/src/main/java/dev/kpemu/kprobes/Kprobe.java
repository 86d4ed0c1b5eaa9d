package dev.kpemu.kprobes;

/**
 * A kprobe ({@code struct kprobe}): a probe point given either by {@link #at(long) address} or by
 * {@link #at(String, long) symbol + offset}, and its handlers. Registration canonicalises the
 * address ({@link #address()}), as the kernel overwrites {@code p->addr}.
 */
public final class Kprobe implements Probe {
    /** {@code pre_handler}: return non-zero when the handler changed the ip (no step, no post handler). */
    @FunctionalInterface
    public interface PreHandler { int handle(Kprobe p, Regs regs); }

    /** {@code post_handler}, after the probed instruction ran; {@code flags} is always 0. */
    @FunctionalInterface
    public interface PostHandler { void handle(Kprobe p, Regs regs, long flags); }

    /**
     * {@code fault_handler}: a fault while stepping the probed instruction or while a handler
     * touched guest memory. {@code trapnr} is the arch trap number (x86 14 = #PF; arm64 the ESR
     * exception class). Return 1 if it handled the fault (it then owns the registers), 0 to let
     * the fault go on to the guest.
     */
    @FunctionalInterface
    public interface FaultHandler { int handle(Kprobe p, Regs regs, int trapnr); }

    public static final int FLAG_GONE = 1, FLAG_DISABLED = 2, FLAG_OPTIMIZED = 4, FLAG_FTRACE = 8, FLAG_ON_FUNC_ENTRY = 16;

    private long address;
    private final String symbolName;
    private final long offset;
    private PreHandler preHandler;
    private PostHandler postHandler;
    private FaultHandler faultHandler;
    int flags;
    volatile long nmissed;
    /** The kretprobe this is the entry probe of, or null. */
    final Kretprobe owner;
    /** Set while registered: the engine's probe point. */
    ProbePoint point;

    private Kprobe(long address, String symbolName, long offset, Kretprobe owner) {
        this.address = address;
        this.symbolName = symbolName;
        this.offset = offset;
        this.owner = owner;
    }

    /** A probe at an address ({@code .addr}). */
    public static Kprobe at(long address) { return new Kprobe(address, null, 0, null); }

    /** A probe at {@code symbol + offset} ({@code .symbol_name}, {@code .offset}). */
    public static Kprobe at(String symbol, long offset) { return new Kprobe(0, symbol, offset, null); }

    /** The kernel's invalid form (both set) is representable so registration can refuse it with EINVAL. */
    public static Kprobe atBoth(long address, String symbol, long offset) { return new Kprobe(address, symbol, offset, null); }

    static Kprobe forKretprobe(Kprobe spec, Kretprobe owner) {
        return new Kprobe(spec.address, spec.symbolName, spec.offset, owner);
    }

    public Kprobe pre(PreHandler h) { this.preHandler = h; return this; }

    public Kprobe post(PostHandler h) { this.postHandler = h; return this; }

    public Kprobe fault(FaultHandler h) { this.faultHandler = h; return this; }

    private RecordedHitHandler recordedHitHandler;

    /**
     * Its pre handler's hits may be recorded by the machine's native code and handed to {@code h}
     * later ({@link RecordedHitHandler}); {@code h} does what the pre handler does, from the record.
     */
    public Kprobe recordedHits(RecordedHitHandler h) { this.recordedHitHandler = h; return this; }

    public RecordedHitHandler recordedHitHandler() { return recordedHitHandler; }

    /** Registers the probe disabled ({@code KPROBE_FLAG_DISABLED}). */
    public Kprobe disabled() { this.flags |= FLAG_DISABLED; return this; }

    /** Its handlers read no guest memory ({@link #readsNoMemory()}). */
    boolean readsNoMemory;

    /**
     * Declares that its handlers read registers only, no guest memory. On an ftrace site the
     * engine then leaves out the return address the ftrace call pushes below the stack pointer
     * (which only a read of memory could see, and which the function's own prologue overwrites);
     * a probe without this declaration always sees it there, as under Linux.
     */
    public Kprobe readsNoMemory() { this.readsNoMemory = true; return this; }

    /** Whether this probe's handlers run after those of the probes registered before it at its address. */
    boolean afterOlder;

    /**
     * Its handlers run after those of the probes registered before it at the same address, not
     * before them as an aggregated kprobe's child does (newest first): the order of Linux 7.x's
     * fprobes on one function, which the event engine gives this engine's probes (recorded).
     */
    public Kprobe runsAfterOlder() { this.afterOlder = true; return this; }

    public PreHandler preHandler() { return preHandler; }

    public PostHandler postHandler() { return postHandler; }

    public FaultHandler faultHandler() { return faultHandler; }

    /** The probe address: as given, or canonical once registered; 0 after unregistering a symbol probe. */
    public long address() { return address; }

    void setAddress(long a) { this.address = a; }

    public String symbolName() { return symbolName; }

    public long offset() { return offset; }

    /**
     * The kernel's {@code kp->flags}: {@link #FLAG_GONE}, {@link #FLAG_DISABLED}, and while
     * registered {@link #FLAG_FTRACE} (armed through ftrace) and {@link #FLAG_OPTIMIZED} (the
     * jump is written), as {@code kprobes/list} shows them.
     */
    public int flags() {
        int f = flags;
        ProbePoint p = point;
        if (p != null) {
            if (p.ftrace) f |= FLAG_FTRACE;
            if (p.listedOptimized.getAsBoolean()) f |= FLAG_OPTIMIZED;
        }
        return f;
    }

    public boolean isDisabled() { return (flags & (FLAG_DISABLED | FLAG_GONE)) != 0; }

    public boolean isGone() { return (flags & FLAG_GONE) != 0; }

    @Override
    public boolean isRegistered() { return point != null; }

    /** Hits that ran no handler: reentry while another probe's handler or step was active. */
    public long nmissed() { return nmissed; }

    @Override
    public Kprobe entryProbe() { return this; }

    @Override
    public long missed() { return nmissed; }

    /** True for the entry probe of a kretprobe (type {@code r} in kprobes/list). */
    public boolean isReturnProbe() { return owner != null; }

    @Override
    public String toString() {
        return symbolName != null ? String.format("kprobe[%s+0x%x @0x%x]", symbolName, offset, address)
                : String.format("kprobe[0x%x]", address);
    }
}
