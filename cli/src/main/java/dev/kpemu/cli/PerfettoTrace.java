package dev.kpemu.cli;

import java.io.IOException;
import java.io.OutputStream;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.util.DefaultPrettyPrinter;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import dev.kpemu.kprobes.events.GuestText;
import dev.kpemu.kprobes.events.ProbeDefinition;
import dev.kpemu.kprobes.events.ProbeParser;
import dev.kpemu.kprobes.events.ProbeSyntaxException;
import dev.kpemu.kprobes.events.ProbeTarget;
import dev.kpemu.kprobes.events.RecordedTrace;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceProbe;
import dev.kpemu.machine.Arch;

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
 *     fields as {@code args} ({@code probe}: the probe point; {@code cpu}: the trace line's cpu
 *     column, the vCPU that hit; each argument as printed).</li>
 * <li>Every kretprobe event is paired with the newest unpaired entry event of the same task and
 *     the same probed function (a kprobe defined on the function's symbol with offset 0): LIFO, so
 *     recursion nests. The pair is a complete slice ({@code "ph":"X"}) named after the function,
 *     from the entry's timestamp, {@code dur} the return's minus the entry's; its args are both
 *     events' fields and cpus ({@code entry cpu}, {@code return cpu}: a task may return on
 *     another CPU). A return with no entry is an instant.</li>
 * <li>Process {@value #CPUS_PID} is the guest's CPUs: each CPU that hit is one thread track
 *     ({@code tid} = the cpu number, named {@code cpu N}), holding every event again as an instant at
 *     its time ({@code task}: comm-pid), so the per-CPU view stands beside the per-task one (ftrace's
 *     per-CPU buffers).</li>
 * <li>Process {@value #KPEMU_PID} is kpemu: its phases ({@code boot}: power-on to /init,
 *     {@code init}: /init to power-off) are slices on one thread.</li>
 * </ul>
 * Times are guest (virtual) time in microseconds, as the trace lines print them. Text is valid
 * Unicode: a guest byte that is not UTF-8 shows as U+FFFD, and an argument that held one has its
 * exact bytes (as printed, quotes included) in base64 beside it, {@code NAME.raw} ({@link GuestText}).
 *
 * <p>Written as the run goes ({@link Writer}): each event is written when it arrives (a slice when
 * its return arrives); only the unpaired entries of functions that have a return probe, and the
 * task names, are kept; the task metadata, the phases and {@code otherData} follow the events.
 */
final class PerfettoTrace {
    static final int GUEST_PID = 1, KPEMU_PID = 2, CPUS_PID = 3, PHASES_TID = 1;

    /** Counts of what was written, for reports and tests. */
    record Counts(int tracks, int instants, int slices, int phases) {}

    private final byte[] json;
    private final Counts counts;

    private PerfettoTrace(byte[] json, Counts counts) {
        this.json = json;
        this.counts = counts;
    }

    /** Converts a whole recorded trace ({@code kpemu convert}). */
    static PerfettoTrace of(RecordedTrace t) {
        java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
        try (Writer w = new Writer(bytes, t.header().arch(), t.header().definitions())) {
            for (ReferenceTrace.Event e : t.events()) w.event(e);
            Counts c = w.finish(t.header());
            return new PerfettoTrace(bytes.toByteArray(), c);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    Counts counts() { return counts; }

    void write(OutputStream out) throws IOException {
        out.write(json);
        out.flush();
    }

    /**
     * The JSON written as events arrive: {@link #event} for each event of the run in order (or
     * {@link #line} for a {@code trace} line), then {@link #finish} with the run's header.
     */
    static final class Writer implements AutoCloseable {
        private final ObjectMapper mapper = new ObjectMapper();
        private final JsonGenerator out;
        private final Map<String, String> entryOf;                          // entry event name -> function
        private final Set<String> returning;                               // functions with a return probe
        private final Map<String, List<String>> names;
        private final Map<Integer, Set<String>> comms = new LinkedHashMap<>();
        private final Set<Integer> cpus = new java.util.TreeSet<>();
        private final Map<String, Deque<ReferenceTrace.Event>> open = new HashMap<>();   // "tid function" -> entries
        private int instants, slices;
        private Counts counts;

        Writer(OutputStream sink, Arch arch, List<String> definitions) throws IOException {
            out = mapper.getFactory().createGenerator(sink).setPrettyPrinter(new DefaultPrettyPrinter())
                    .disable(JsonGenerator.Feature.AUTO_CLOSE_TARGET);
            entryOf = new HashMap<>();
            returning = new HashSet<>();
            ProbeParser parser = new ProbeParser(arch);
            for (String d : definitions) {
                try {
                    ProbeDefinition pd = parser.parse(d);
                    if (pd instanceof TraceProbe p && p.target() instanceof ProbeTarget.SymbolTarget s) {
                        if (p.isReturn()) returning.add(s.symbol());
                        else if (s.offset() == 0) entryOf.putIfAbsent(p.event(), s.symbol());
                    }
                } catch (ProbeSyntaxException e) {
                    // a definition the trace could not have been recorded with: no entry events from it
                }
            }
            names = ReferenceTrace.argumentNames(definitions, arch);
            out.writeStartObject();
            out.writeArrayFieldStart("traceEvents");
        }

        /** A full {@code trace} line of the run; lines that are no event of the definitions are skipped. */
        void line(String traceLine) throws IOException {
            ReferenceTrace.Event e = ReferenceTrace.parseEvent(traceLine, names);
            if (e != null && names.containsKey(e.name())) event(e);
        }

        void event(ReferenceTrace.Event e) throws IOException {
            if (e.context() == null) return;
            int tid = e.context().pid();
            comms.computeIfAbsent(tid, k -> new LinkedHashSet<>()).add(e.context().comm());
            cpuInstant(e);
            if (e.isReturn()) {
                Deque<ReferenceTrace.Event> stack = open.get(tid + " " + e.function());
                ReferenceTrace.Event entry = stack == null ? null : stack.pollFirst();
                if (stack != null && stack.isEmpty()) open.remove(tid + " " + e.function());
                if (entry != null) {
                    ObjectNode x = event(e.function(), "kretprobe", "X", tid, micros(entry));
                    x.put("dur", micros(e) - micros(entry));
                    ObjectNode args = x.putObject("args");
                    args.put("entry", entry.name());
                    args.put("entry probe", entry.probePoint());
                    args.put("entry cpu", entry.context().cpu());
                    for (ReferenceTrace.Arg a : entry.args()) putArg(args, entry.name() + "." + a.name(), a.value());
                    args.put("return", e.name());
                    args.put("return site", e.probePoint());
                    args.put("return cpu", e.context().cpu());
                    for (ReferenceTrace.Arg a : e.args()) putArg(args, e.name() + "." + a.name(), a.value());
                    mapper.writeTree(out, x);
                    slices++;
                    return;
                }
                mapper.writeTree(out, instant(e, tid));
                instants++;
                return;
            }
            mapper.writeTree(out, instant(e, tid));
            instants++;
            String fn = entryOf.get(e.name());
            if (fn != null && returning.contains(fn)) open.computeIfAbsent(tid + " " + fn, k -> new ArrayDeque<>()).push(e);
        }

        /** {@code e} again on its CPU's track. */
        private void cpuInstant(ReferenceTrace.Event e) throws IOException {
            int cpu = e.context().cpu();
            cpus.add(cpu);
            ObjectNode o = instant(e, cpu);
            o.put("pid", CPUS_PID);
            ((ObjectNode) o.get("args")).put("task", GuestText.displayable(e.context().comm()) + "-" + e.context().pid());
            mapper.writeTree(out, o);
        }

        /** The tasks' names, the phases and {@code otherData}; ends the JSON. */
        Counts finish(RecordedTrace.Header h) throws IOException {
            if (counts != null) return counts;
            mapper.writeTree(out, meta("process_name", GUEST_PID, null, "guest: Linux " + (h.kernelRelease() == null ? "" : h.kernelRelease() + " ")
                    + h.arch().linuxName()));
            for (Map.Entry<Integer, Set<String>> c : comms.entrySet()) {
                mapper.writeTree(out, meta("thread_name", GUEST_PID, c.getKey(), GuestText.displayable(String.join("/", c.getValue())) + "-" + c.getKey()));
                ObjectNode sort = meta("thread_sort_index", GUEST_PID, c.getKey(), null);
                sort.putObject("args").put("sort_index", c.getKey());
                mapper.writeTree(out, sort);
            }
            if (!cpus.isEmpty()) mapper.writeTree(out, meta("process_name", CPUS_PID, null, "guest CPUs"));
            for (int cpu : cpus) {
                mapper.writeTree(out, meta("thread_name", CPUS_PID, cpu, "cpu " + cpu));
                ObjectNode sort = meta("thread_sort_index", CPUS_PID, cpu, null);
                sort.putObject("args").put("sort_index", cpu);
                mapper.writeTree(out, sort);
            }
            mapper.writeTree(out, meta("process_name", KPEMU_PID, null, "kpemu"));
            mapper.writeTree(out, meta("thread_name", KPEMU_PID, PHASES_TID, "phases"));
            for (RecordedTrace.Phase p : h.phases()) {
                ObjectNode x = event(p.name(), "kpemu", "X", PHASES_TID, p.startNanos() / 1000);
                x.put("pid", KPEMU_PID);
                x.put("dur", p.endNanos() / 1000 - p.startNanos() / 1000);
                mapper.writeTree(out, x);
            }
            out.writeEndArray();
            out.writeStringField("displayTimeUnit", "ns");
            ObjectNode other = mapper.createObjectNode();
            other.put("source", "kpemu");
            other.put("arch", h.arch().linuxName());
            if (h.kernelRelease() != null) other.put("kernel", h.kernelRelease());
            if (h.packageVersion() != null) other.put("kernel package version", h.packageVersion());
            if (h.buildId() != null) other.put("kernel build-id", h.buildId());
            if (h.kpemuVersion() != null) other.put("kpemu version", h.kpemuVersion());
            other.put("definitions", String.join("\n", h.definitions()));
            other.put("time", "guest (virtual) time");
            out.writeFieldName("otherData");
            mapper.writeTree(out, other);
            out.writeEndObject();
            out.flush();
            counts = new Counts(comms.size(), instants, slices, h.phases().size());
            return counts;
        }

        @Override public void close() throws IOException { out.close(); }

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
            args.put("cpu", e.context().cpu());
            for (ReferenceTrace.Arg a : e.args()) putArg(args, a.name(), a.value());
            return o;
        }

        /**
         * An argument as printed, as valid Unicode (each byte that is not UTF-8 U+FFFD); when it
         * held such bytes, its exact bytes follow in base64 as {@code KEY.raw} ({@link GuestText}).
         */
        private static void putArg(ObjectNode args, String key, String printed) {
            args.put(key, GuestText.displayable(printed));
            if (GuestText.hasRawBytes(printed)) args.put(key + ".raw", GuestText.base64(printed));
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
    }
}
