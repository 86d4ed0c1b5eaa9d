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
 */
public record TraceRecord(String group, String event, TraceContext context, String body, boolean isReturn,
                          long ip, long retIp) {
    /** The full {@code trace} line (no newline). */
    public String line() { return TraceFormatter.contextPrefix(context) + body; }
}
