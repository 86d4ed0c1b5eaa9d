package dev.kpemu.kprobes.events;

/**
 * One recorded event, as the {@code trace} file would show it.
 *
 * @param group    the event's group ({@code kprobes} by default)
 * @param event    the event name
 * @param context  the context columns (comm-pid, cpu, latency flags, guest time)
 * @param body     the text after the context: {@code EVENT: (sym+0xoff/0xsize) args}
 * @param isReturn whether a kretprobe produced it
 * @param ip       kprobe: the probed address ({@code __probe_ip}); kretprobe: the function ({@code __probe_func})
 * @param retIp    kretprobe: the real return address ({@code __probe_ret_ip}); kprobe: 0
 * @param id       the event's trace-event id ({@code common_type})
 * @param args     the fetch arguments, typed ({@link EventArg}), in definition order
 */
public record TraceRecord(String group, String event, TraceContext context, String body, boolean isReturn,
                          long ip, long retIp, int id, java.util.List<EventArg> args) {
    public TraceRecord {
        if (!(args instanceof DecodedArgs)) args = java.util.List.copyOf(args);   // decoded on first read, immutable
    }

    /** A record without typed arguments (text only). */
    public TraceRecord(String group, String event, TraceContext context, String body, boolean isReturn, long ip, long retIp) {
        this(group, event, context, body, isReturn, ip, retIp, 0, java.util.List.of());
    }

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
        int open = body.indexOf(": (") + 3, close = body.indexOf(')', open);
        return open < 3 || close < 0 ? "" : body.substring(open, close);
    }

    /** {@code common_flags}' TRACE_FLAG_IRQS_OFF (0x01) from the latency column. */
    public int commonFlags() { return context.latency().charAt(0) == 'd' ? 0x01 : 0; }

    /** The full {@code trace} line (no newline). */
    public String line() { return TraceFormatter.contextPrefix(context) + body; }
}
