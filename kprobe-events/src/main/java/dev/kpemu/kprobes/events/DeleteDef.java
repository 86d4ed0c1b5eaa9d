package dev.kpemu.kprobes.events;

import java.util.List;

/**
 * {@code -:[GRP/]EVENT [place [args...]]} ({@code dyn_event_release}): removes every probe of
 * the event ({@code group} null matches any group; an empty {@code event} with a group matches
 * the whole group); extra tokens restrict it to the probe whose place and args match.
 */
public record DeleteDef(String group, String event, List<String> filter, String command)
        implements ProbeDefinition {
    public DeleteDef {
        filter = List.copyOf(filter);
    }

    /** {@code trace_kprobe_match}: whether this command deletes {@code probe}. */
    public boolean matches(TraceProbe probe) {
        if (!event.isEmpty() && !event.equals(probe.event())) return false;
        if (group != null && !group.equals(probe.group())) return false;
        if (filter.isEmpty()) return true;
        if (!filter.get(0).equals(TraceFormatter.place(probe.target()))) return false;
        if (probe.args().size() < filter.size() - 1) return false;
        for (int i = 1; i < filter.size(); i++) {
            FetchArg a = probe.args().get(i - 1);
            if (!filter.get(i).equals(a.name() + "=" + a.expression())) return false;
        }
        return true;
    }
}
