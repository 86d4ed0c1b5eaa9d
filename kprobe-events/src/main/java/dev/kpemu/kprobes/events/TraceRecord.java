package dev.kpemu.kprobes.events;

import java.util.List;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * One recorded event, as the {@code trace} file would show it.
 *
 * <p>An event of the engine ({@link EventEngine}) holds the values its probe fetched, in the
 * binary layout of the kernel's trace entry, and formats its text only when asked: as ftrace
 * writes the raw entry at the hit and prints it when {@code trace} is read, so a hit costs the
 * fetch and not the formatting. Records are immutable; {@link #body()} is computed once.
 *
 * <p>Components (the accessors of the record this class was): {@code group} the event's group
 * ({@code kprobes} by default); {@code event} the event name; {@code context} the context columns
 * (comm-pid, cpu, latency flags, guest time); {@code body} the text after the context:
 * {@code EVENT: (sym+0xoff/0xsize) args}; {@code isReturn} whether a kretprobe produced it;
 * {@code ip} kprobe: the probed address ({@code __probe_ip}), kretprobe: the function
 * ({@code __probe_func}); {@code retIp} kretprobe: the real return address
 * ({@code __probe_ret_ip}), kprobe: 0; {@code id} the event's trace-event id ({@code common_type});
 * {@code args} the fetch arguments, typed ({@link EventArg}), in definition order.
 */
public final class TraceRecord {
    private final String group, event;
    private final TraceContext context;
    private final boolean isReturn;
    private final boolean uprobe;
    private final long ip, retIp;
    private final int id;
    private final List<EventArg> args;
    /** Formats the body on first use (kept: a record read from two threads may format twice, never fails). */
    private final Supplier<String> bodySource;
    private String body;

    public TraceRecord(String group, String event, TraceContext context, String body, boolean isReturn,
                       long ip, long retIp, int id, List<EventArg> args) {
        this(group, event, context, isReturn, ip, retIp, id, args, null);
        this.body = Objects.requireNonNull(body);
    }

    /** A record without typed arguments (text only). */
    public TraceRecord(String group, String event, TraceContext context, String body, boolean isReturn, long ip, long retIp) {
        this(group, event, context, body, isReturn, ip, retIp, 0, List.of());
    }

    /** A record whose body {@code bodySource} formats when it is first asked for. */
    TraceRecord(String group, String event, TraceContext context, boolean isReturn, long ip, long retIp, int id,
                List<EventArg> args, Supplier<String> bodySource) {
        this(group, event, context, isReturn, ip, retIp, id, args, bodySource, false);
    }

    /** As above; {@code uprobe}: a uprobe event's record (ip and retIp are user addresses). */
    TraceRecord(String group, String event, TraceContext context, boolean isReturn, long ip, long retIp, int id,
                List<EventArg> args, Supplier<String> bodySource, boolean uprobe) {
        this.uprobe = uprobe;
        this.group = group;
        this.event = event;
        this.context = context;
        this.isReturn = isReturn;
        this.ip = ip;
        this.retIp = retIp;
        this.id = id;
        this.args = args instanceof DecodedArgs ? args : List.copyOf(args);   // decoded on first read, immutable
        this.bodySource = bodySource;
    }

    public String group() { return group; }

    public String event() { return event; }

    public TraceContext context() { return context; }

    /** The text after the context: {@code EVENT: (sym+0xoff/0xsize) args}. */
    public String body() {
        String b = body;
        if (b == null) body = b = bodySource.get();
        return b;
    }

    public boolean isReturn() { return isReturn; }

    /** Whether a uprobe event made it (a uretprobe when {@link #isReturn()}): its addresses are user addresses. */
    public boolean isUprobe() { return uprobe; }

    public long ip() { return ip; }

    public long retIp() { return retIp; }

    public int id() { return id; }

    public List<EventArg> args() { return args; }

    /** The argument named {@code name}, or null. */
    public EventArg arg(String name) {
        for (EventArg a : args) if (a.name().equals(name)) return a;
        return null;
    }

    /**
     * The probe point as the line prints it, inside the parentheses after the event name:
     * {@code sym+0xoff/0xsize} for a kprobe, {@code ret+0xoff/0xsize <- func} for a kretprobe.
     */
    public String probeText() {
        String body = body();
        int open = body.indexOf(": (") + 3, close = body.indexOf(')', open);
        return open < 3 || close < 0 ? "" : body.substring(open, close);
    }

    /** {@code common_flags}: the entry's trace flags, as the latency column shows them ({@link LatencyFlags#flagsOf}). */
    public int commonFlags() { return LatencyFlags.flagsOf(context.latency()); }

    /** {@code common_preempt_count}: preempt depth, migrate-disable depth in the high nibble ({@link LatencyFlags#preemptCountOf}). */
    public int commonPreemptCount() { return LatencyFlags.preemptCountOf(context.latency()); }

    /** The full {@code trace} line (no newline); the guest's bytes that are not UTF-8 as {@link GuestText} carries them. */
    public String line() { return TraceFormatter.contextPrefix(context) + body(); }

    /** {@link #line()} as the bytes Linux's {@code trace} file shows (no newline). */
    public byte[] lineBytes() { return GuestText.encode(line()); }

    /**
     * {@link #lineBytes()} appended to {@code b}: a body not formatted yet is formatted into
     * {@code b} in place ({@link BodyText}), not kept (a writer of many lines builds no string per line).
     */
    public LineBytes appendLine(LineBytes b) {
        TraceFormatter.appendContextPrefix(b, context);
        String text = body;
        if (text == null && bodySource instanceof BodyText t) return t.appendTo(b);
        return b.text(body());
    }

    /** A body source that can also format straight into a line's bytes. */
    interface BodyText extends Supplier<String> {
        /** The body appended to {@code b}: the bytes of what {@link #get()} returns. */
        LineBytes appendTo(LineBytes b);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TraceRecord r && group.equals(r.group) && event.equals(r.event) && context.equals(r.context)
                && body().equals(r.body()) && isReturn == r.isReturn && ip == r.ip && retIp == r.retIp && id == r.id
                && args.equals(r.args);
    }

    @Override
    public int hashCode() { return Objects.hash(group, event, context, body(), isReturn, ip, retIp, id, args); }

    @Override
    public String toString() {
        return "TraceRecord[group=" + group + ", event=" + event + ", context=" + context + ", body=" + body() + ", isReturn="
                + isReturn + ", ip=" + ip + ", retIp=" + retIp + ", id=" + id + ", args=" + args + "]";
    }
}
