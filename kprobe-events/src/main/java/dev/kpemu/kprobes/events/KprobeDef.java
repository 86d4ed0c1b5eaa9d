package dev.kpemu.kprobes.events;

import java.util.List;

/**
 * {@code p[:[GRP/][EVENT]] [MOD:]SYM[+offs]|MEMADDR [FETCHARGS]}. {@code functionEntry}
 * records whether the kernel treats the place as a function entry (which enables
 * {@code $argN}).
 */
public record KprobeDef(String group, String event, ProbeTarget target, boolean functionEntry,
                        List<FetchArg> args, String command)
        implements ProbeDefinition, TraceProbe {
    public KprobeDef {
        args = List.copyOf(args);
    }
}
