package dev.kpemu.kprobes.events;

import java.util.List;

/**
 * {@code r[MAXACTIVE][:[GRP/][EVENT]] SYM[+0] [FETCHARGS]} or the {@code SYM%return} form
 * ({@code returnSuffix}). {@code maxactive} is 0 when not given (the kernel's default).
 */
public record KretprobeDef(String group, String event, ProbeTarget target, int maxactive,
                           boolean returnSuffix, List<FetchArg> args, String command)
        implements ProbeDefinition, TraceProbe {
    public KretprobeDef {
        args = List.copyOf(args);
    }
}
