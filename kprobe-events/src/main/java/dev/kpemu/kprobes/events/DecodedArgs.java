package dev.kpemu.kprobes.events;

import java.util.AbstractList;
import java.util.List;

/**
 * An event's typed arguments, decoded from its fetched bytes only when something reads them (a
 * filter, a hist trigger, the JSON writer): the text line alone, the common case, never pays
 * for them. Immutable; decoded once.
 */
final class DecodedArgs extends AbstractList<EventArg> {
    private final TraceFormatter formatter;
    private final CompiledProbe probe;
    private final byte[] data;
    private List<EventArg> decoded;

    DecodedArgs(TraceFormatter formatter, CompiledProbe probe, byte[] data) {
        this.formatter = formatter;
        this.probe = probe;
        this.data = data;
    }

    private List<EventArg> decoded() {
        if (decoded == null) decoded = List.copyOf(formatter.decodeArgs(probe, data));
        return decoded;
    }

    @Override public EventArg get(int index) { return decoded().get(index); }

    @Override public int size() { return probe.definition().args().size(); }
}
