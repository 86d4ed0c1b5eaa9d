package dev.kpemu.kprobes.events;

import java.util.ArrayList;
import java.util.List;

import dev.kpemu.kprobes.events.filter.EventFilter;
import dev.kpemu.kprobes.events.filter.FilterParseException;
import dev.kpemu.kprobes.events.hist.HistTrigger;
import dev.kpemu.kprobes.events.hist.HistTriggerException;

/**
 * What a user writes to an event's tracefs files besides {@code kprobe_events}, given before the
 * boot: filters ({@code events/GROUP/EVENT/filter}), triggers ({@code .../trigger}: hist, and wprobes' set_wprobe/clear_wprobe) and
 * events left disabled ({@code .../enable}). Each names its event as {@code EVENT} or
 * {@code GROUP/EVENT}. {@link #check} refuses, before the guest runs, what the kernel would
 * refuse; {@link #apply} writes it all once the events exist.
 */
public final class EventSetup {
    /** {@code EVENT:EXPR}. */
    public record Filter(String event, String expr) {}

    /** {@code EVENT:hist:...}. */
    public record Trigger(String event, String text) {}

    /** A filter or trigger the kernel refuses, or one naming no defined event. */
    public static final class Rejected extends Exception {
        private final List<String> details;

        Rejected(String message, List<String> details) {
            super(message);
            this.details = List.copyOf(details);
        }

        /** Further lines: the error_log entry Linux makes for the refused write (none when it logs nothing). */
        public List<String> details() { return details; }
    }

    private final List<Filter> filters = new ArrayList<>();
    private final List<Trigger> triggers = new ArrayList<>();
    private final List<String> disabled = new ArrayList<>();

    public boolean isEmpty() { return filters.isEmpty() && triggers.isEmpty() && disabled.isEmpty(); }

    /** Adds {@code EVENT:EXPR}. */
    public EventSetup filter(String option) {
        String[] p = split(option, "--filter", "EVENT:EXPR");
        filters.add(new Filter(p[0], p[1]));
        return this;
    }

    /** Adds {@code EVENT:hist:...[ if FILTER]}. */
    public EventSetup trigger(String option) {
        String[] p = split(option, "--trigger", "EVENT:hist:keys=...");
        triggers.add(new Trigger(p[0], p[1]));
        return this;
    }

    /** Leaves {@code event} disabled (its triggers still count). */
    public EventSetup disable(String event) {
        disabled.add(event.strip());
        return this;
    }

    public List<Filter> filters() { return List.copyOf(filters); }

    public List<Trigger> triggers() { return List.copyOf(triggers); }

    public List<String> disabled() { return List.copyOf(disabled); }

    private static String[] split(String option, String flag, String form) {
        int c = option.indexOf(':');
        if (c <= 0 || c == option.length() - 1) throw new IllegalArgumentException(flag + " takes " + form + ", not '" + option + "'");
        return new String[] {option.substring(0, c).strip(), option.substring(c + 1)};
    }

    /**
     * Checks every entry against the events {@code definitions} create, as the kernel would
     * check the writes: the event exists, the filter parses, the trigger parses.
     */
    public void check(List<TraceProbe> definitions, KernelSymbols symbols) throws Rejected {
        check(definitions, symbols, Dialect.LINUX_6_1);
    }

    /** As {@link #check(List, KernelSymbols)}, as the kernel of {@code dialect} checks the writes. */
    public void check(List<TraceProbe> definitions, KernelSymbols symbols, Dialect dialect) throws Rejected {
        for (Filter f : filters) {
            TraceProbe d = find(definitions, f.event(), "--filter");
            String t = f.expr().strip();
            if (t.isEmpty() || t.equals("0")) continue;
            try {
                EventFilter.parse(t, EventFields.of(d), dialect.filters());
            } catch (FilterParseException e) {
                throw filterRejected(f, e);
            }
        }
        for (Trigger t : triggers) {
            TraceProbe d = find(definitions, t.event(), "--trigger");
            try {
                if (WprobeTrigger.isOne(t.text())) {
                    WprobeTrigger w = WprobeTrigger.parse(t.text(), d, dialect.filters());
                    if (definitions.stream().noneMatch(x -> x instanceof WprobeDef && x.group().equals(WprobeDef.GROUP) && x.event().equals(w.wprobe())))
                        throw new HistTriggerException("No such file or directory: no wprobe event " + WprobeDef.GROUP + "/" + w.wprobe());
                    continue;
                }
                HistTrigger.parse(t.text(), EventFields.of(d), symbols, dialect);
            } catch (HistTriggerException e) {
                throw triggerRejected(t, d, e);
            }
        }
        for (String e : disabled) find(definitions, e, "--disable");
    }

    /** Writes the filters, then the triggers, then the disables to the engine's events. */
    public void apply(EventEngine engine) throws Rejected {
        for (Filter f : filters) {
            try {
                engine.setFilter(f.event(), f.expr());
            } catch (FilterParseException e) {
                throw filterRejected(f, e);
            }
        }
        for (Trigger t : triggers) {
            try {
                engine.addTrigger(t.event(), t.text());
            } catch (HistTriggerException e) {
                throw new Rejected("kpemu: --trigger " + t.event() + ": " + e.getMessage(), List.of());
            }
        }
        for (String e : disabled) engine.disable(e);
    }

    /** The summary line, then the kernel's error_log entry for the write. */
    private static Rejected filterRejected(Filter f, FilterParseException e) {
        String what = e.error() == null ? "Error" : e.error().text();
        return new Rejected("kpemu: --filter " + f.event() + ": " + what, e.errorLog().lines().toList());
    }

    private static Rejected triggerRejected(Trigger t, TraceProbe d, HistTriggerException e) {
        return new Rejected("kpemu: --trigger " + t.event() + ": " + e.getMessage(),
                e.logged() ? e.errorLog(d.group(), d.event()).lines().toList() : List.of());
    }

    private static TraceProbe find(List<TraceProbe> definitions, String event, String flag) throws Rejected {
        TraceProbe byName = null;
        for (TraceProbe d : definitions) {
            if ((d.group() + "/" + d.event()).equals(event)) return d;
            if (byName == null && event.indexOf('/') < 0 && d.event().equals(event)) byName = d;
        }
        if (byName != null) return byName;
        throw new Rejected("kpemu: " + flag + " " + event + ": no such event (events are named by the definitions: EVENT or GROUP/EVENT)", List.of());
    }
}
