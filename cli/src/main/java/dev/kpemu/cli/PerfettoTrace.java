package dev.kpemu.cli;

import java.io.IOException;
import java.io.OutputStream;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import dev.kpemu.kprobes.events.ProbeDefinition;
import dev.kpemu.kprobes.events.ProbeParser;
import dev.kpemu.kprobes.events.ProbeSyntaxException;
import dev.kpemu.kprobes.events.ProbeTarget;
import dev.kpemu.kprobes.events.RecordedTrace;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceProbe;

/**
 * A recorded trace as Chrome/Perfetto trace-event JSON (the "JSON Object Format" of the Trace
 * Event Format: {@code {"traceEvents": [...], "displayTimeUnit": ..., "otherData": {...}}}), which
 * ui.perfetto.dev and chrome://tracing open.
 *
 * <ul>
 * <li>Process {@value #GUEST_PID} is the guest; each task is one thread track ({@code tid} = the
 *     task's pid), named {@code comm-pid} by a {@code thread_name} metadata event (comms a task had
 *     over its life, e.g. {@code sh} then {@code cat} after exec, are joined with {@code /}).</li>
 * <li>Every kprobe event is an instant ({@code "ph":"i"}, thread scope) named after the event, its
 *     fields as {@code args} ({@code probe}: the probe point; each argument as printed).</li>
 * <li>Every kretprobe event is paired with the newest unpaired entry event of the same task and
 *     the same probed function (a kprobe defined on the function's symbol with offset 0): LIFO, so
 *     recursion nests. The pair is a complete slice ({@code "ph":"X"}) named after the function,
 *     from the entry's timestamp, {@code dur} the return's minus the entry's; its args are both
 *     events' fields. A return with no entry is an instant.</li>
 * <li>Process {@value #KPEMU_PID} is kpemu: its phases ({@code boot}: power-on to /init,
 *     {@code init}: /init to power-off) are slices on one thread.</li>
 * </ul>
 * Times are guest (virtual) time in microseconds, as the trace lines print them.
 */
final class PerfettoTrace {
    static final int GUEST_PID = 1, KPEMU_PID = 2, PHASES_TID = 1;

    /** Counts of what was written, for reports and tests. */
    record Counts(int tracks, int instants, int slices, int phases) {}

    private final ObjectMapper mapper = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    private final ObjectNode root = mapper.createObjectNode();
    private final Counts counts;

    private PerfettoTrace(RecordedTrace t) {
        RecordedTrace.Header h = t.header();
        Map<String, String> entryOf = entryEvents(t);                   // event name -> function
        ArrayNode events = mapper.createArrayNode();
        Map<Integer, Set<String>> comms = new LinkedHashMap<>();
        Map<String, Deque<ReferenceTrace.Event>> open = new HashMap<>();    // "tid function" -> entries
        List<ObjectNode> body = new ArrayList<>();
        int instants = 0, slices = 0;
        for (ReferenceTrace.Event e : t.events()) {
            if (e.context() == null) continue;
            int tid = e.context().pid();
            comms.computeIfAbsent(tid, k -> new LinkedHashSet<>()).add(e.context().comm());
            if (e.isReturn()) {
                Deque<ReferenceTrace.Event> stack = open.get(tid + " " + e.function());
                ReferenceTrace.Event entry = stack == null ? null : stack.pollFirst();
                if (entry != null) {
                    ObjectNode x = event(e.function(), "kretprobe", "X", tid, micros(entry));
                    x.put("dur", micros(e) - micros(entry));
                    ObjectNode args = x.putObject("args");
                    args.put("entry", entry.name());
                    args.put("entry probe", entry.probePoint());
                    for (ReferenceTrace.Arg a : entry.args()) args.put(entry.name() + "." + a.name(), a.value());
                    args.put("return", e.name());
                    args.put("return site", e.probePoint());
                    for (ReferenceTrace.Arg a : e.args()) args.put(e.name() + "." + a.name(), a.value());
                    body.add(x);
                    slices++;
                    continue;
                }
                body.add(instant(e, tid));
                instants++;
                continue;
            }
            body.add(instant(e, tid));
            instants++;
            String fn = entryOf.get(e.name());
            if (fn != null) open.computeIfAbsent(tid + " " + fn, k -> new ArrayDeque<>()).push(e);
        }
        events.add(meta("process_name", GUEST_PID, null, "guest: Linux " + (h.kernelRelease() == null ? "" : h.kernelRelease() + " ")
                + h.arch().linuxName()));
        for (Map.Entry<Integer, Set<String>> c : comms.entrySet()) {
            events.add(meta("thread_name", GUEST_PID, c.getKey(), String.join("/", c.getValue()) + "-" + c.getKey()));
            ObjectNode sort = meta("thread_sort_index", GUEST_PID, c.getKey(), null);
            sort.putObject("args").put("sort_index", c.getKey());
            events.add(sort);
        }
        events.add(meta("process_name", KPEMU_PID, null, "kpemu"));
        events.add(meta("thread_name", KPEMU_PID, PHASES_TID, "phases"));
        for (RecordedTrace.Phase p : h.phases()) {
            ObjectNode x = event(p.name(), "kpemu", "X", PHASES_TID, p.startNanos() / 1000);
            x.put("pid", KPEMU_PID);
            x.put("dur", p.endNanos() / 1000 - p.startNanos() / 1000);
            body.add(x);
        }
        body.forEach(events::add);
        root.set("traceEvents", events);
        root.put("displayTimeUnit", "ns");
        ObjectNode other = root.putObject("otherData");
        other.put("source", "kpemu");
        other.put("arch", h.arch().linuxName());
        if (h.kernelRelease() != null) other.put("kernel", h.kernelRelease());
        if (h.packageVersion() != null) other.put("kernel package version", h.packageVersion());
        if (h.buildId() != null) other.put("kernel build-id", h.buildId());
        if (h.kpemuVersion() != null) other.put("kpemu version", h.kpemuVersion());
        other.put("definitions", String.join("\n", h.definitions()));
        other.put("time", "guest (virtual) time");
        counts = new Counts(comms.size(), instants, slices, h.phases().size());
    }

    /** Converts {@code t}. */
    static PerfettoTrace of(RecordedTrace t) { return new PerfettoTrace(t); }

    Counts counts() { return counts; }

    ObjectNode json() { return root; }

    void write(OutputStream out) throws IOException {
        mapper.writeValue(new NonClosing(out), root);
        out.flush();
    }

    /** Events whose definitions probe a function's entry (symbol, offset 0), to the function. */
    private static Map<String, String> entryEvents(RecordedTrace t) {
        Map<String, String> out = new HashMap<>();
        ProbeParser parser = new ProbeParser(t.header().arch());
        for (String d : t.header().definitions()) {
            try {
                ProbeDefinition pd = parser.parse(d);
                if (pd instanceof TraceProbe p && !p.isReturn() && p.target() instanceof ProbeTarget.SymbolTarget s && s.offset() == 0)
                    out.putIfAbsent(p.event(), s.symbol());
            } catch (ProbeSyntaxException e) {
                // a definition the trace could not have been recorded with: no entry events from it
            }
        }
        return out;
    }

    private static long micros(ReferenceTrace.Event e) { return e.context().timestampNanos() / 1000; }

    private ObjectNode event(String name, String cat, String ph, int tid, long ts) {
        ObjectNode o = mapper.createObjectNode();
        o.put("name", name);
        o.put("cat", cat);
        o.put("ph", ph);
        o.put("ts", ts);
        o.put("pid", GUEST_PID);
        o.put("tid", tid);
        return o;
    }

    private ObjectNode instant(ReferenceTrace.Event e, int tid) {
        ObjectNode o = event(e.name(), e.isReturn() ? "kretprobe" : "kprobe", "i", tid, micros(e));
        o.put("s", "t");
        ObjectNode args = o.putObject("args");
        args.put("probe", e.isReturn() ? e.probePoint() + " <- " + e.function() : e.probePoint());
        for (ReferenceTrace.Arg a : e.args()) args.put(a.name(), a.value());
        return o;
    }

    private ObjectNode meta(String name, int pid, Integer tid, String value) {
        ObjectNode o = mapper.createObjectNode();
        o.put("name", name);
        o.put("ph", "M");
        o.put("pid", pid);
        if (tid != null) o.put("tid", tid);
        if (value != null) o.putObject("args").put("name", value);
        return o;
    }

    /** Jackson closes the stream it writes to; stdout must stay open. */
    private static final class NonClosing extends java.io.FilterOutputStream {
        NonClosing(OutputStream out) { super(out); }

        @Override public void write(byte[] b, int off, int len) throws IOException { out.write(b, off, len); }

        @Override public void close() throws IOException { flush(); }
    }
}
