package dev.kpemu.kprobes.events;

import java.util.List;

/**
 * An fprobe event of {@code dynamic_events} (Linux 6.4+, {@code trace_fprobe}):
 * {@code f[:[GRP/][EVENT]] KSYM [FETCHARGS]} (function entry), {@code f[MAXACTIVE][:[GRP/][EVENT]]
 * KSYM%return [FETCHARGS]} (function exit; a {@code $retval} argument makes it one too), or a
 * tracepoint probe {@code t[:[GRP/][EVENT]] TRACEPOINT [FETCHARGS]}. {@code symbol} is what the
 * kernel keeps: for an fprobe an ftrace filter (a function name or a glob, {@code vfs_re*}), for a
 * tracepoint probe the tracepoint's name. The default group is {@code fprobes} or {@code tracepoints}.
 */
public record FprobeDef(String group, String event, String symbol, boolean tracepoint, boolean exit,
                        int maxactive, List<FetchArg> args, String command)
        implements ProbeDefinition, TraceProbe {
    /** {@code FPROBE_EVENT_SYSTEM}. */
    public static final String FPROBE_GROUP = "fprobes";
    /** {@code TRACEPOINT_EVENT_SYSTEM}. */
    public static final String TRACEPOINT_GROUP = "tracepoints";
    /** The name trace_fprobe's error_log entries carry. */
    public static final String SUBSYSTEM = "trace_fprobe";

    public FprobeDef {
        args = List.copyOf(args);
    }

    /** The function (for a tracepoint probe: the tracepoint's name), as a symbol target at offset 0. */
    @Override
    public ProbeTarget target() { return new ProbeTarget.SymbolTarget(null, symbol, 0); }

    /** The probestub function a tracepoint probe attaches to ({@code tpoint->probestub}). */
    public static String probestub(String tracepoint) { return "__probestub_" + tracepoint; }
}
