package dev.kpemu.kprobes.events;

import java.util.List;

/** A definition that creates (or appends to) an event: a kprobe, a kretprobe, an fprobe or tracepoint probe, or a wprobe. */
public sealed interface TraceProbe permits KprobeDef, KretprobeDef, FprobeDef, WprobeDef {
    String group();

    String event();

    ProbeTarget target();

    List<FetchArg> args();

    String command();

    /** Whether the event is a return probe. */
    default boolean isReturn() { return this instanceof KretprobeDef || this instanceof FprobeDef f && f.exit(); }

    /** The probe's line in {@code kprobe_events} ({@code trace_kprobe_show}), without newline. */
    default String listing() { return TraceFormatter.listing(this); }
}
