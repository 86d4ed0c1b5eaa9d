package dev.kpemu.cli;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceComparator;
import dev.kpemu.machine.Arch;

/**
 * Compares two answers to one fuzz set as {@code CorpusTraceTest} compares the recorded corpus:
 * first accepted or refused per definition (with the error_log message when both refused), then
 * the traces of the definitions both accepted, over the workload's window ({@link CorpusGuest#window}),
 * event by event with {@link TraceComparator} ({@code EXACT}: the same kernel on both sides; the
 * latency column's structure compared, need-resched not).
 *
 * <p>When the event counts are equal every mismatch is its own difference; when they differ, only
 * the first (every later event is shifted by it).
 */
public final class FuzzComparison {
    /** The outcome: the differences, and how many events of the window were compared. */
    public record Result(List<FuzzDifference> differences, int linuxEvents, int kpemuEvents, int mismatches) {
        public boolean identical() { return differences.isEmpty(); }
    }

    private FuzzComparison() {}

    static Result compare(Arch arch, String release, List<String> definitions, FuzzRun linux, FuzzRun kpemu) {
        List<FuzzDifference> out = new ArrayList<>();
        Map<String, String> functionOf = new HashMap<>(), definitionOf = new HashMap<>();
        List<String> both = new ArrayList<>();
        for (String d : definitions) {
            String[] f = d.strip().split("\\s+");
            String fn = f.length > 1 ? f[1].replaceAll("[+%].*$", "") : "";
            String head = f[0];
            String event = head.contains(":") ? head.substring(head.indexOf(':') + 1).replaceAll("^.*/", "") : "";
            functionOf.put(event, fn);
            definitionOf.put(event, d);
            boolean lr = linux.refused().containsKey(d), kr = kpemu.refused().containsKey(d);
            if (lr != kr) {
                out.add(new FuzzDifference("refusal", d, fn, "accepted", lr ? "refused: " + linux.refused().get(d) : "accepted",
                        kr ? "refused: " + kpemu.refused().get(d) : "accepted", -1));
            } else if (lr) {
                String lm = message(linux.refused().get(d)), km = message(kpemu.refused().get(d));
                if (!lm.isEmpty() && !km.isEmpty() && !lm.equals(km)) out.add(new FuzzDifference("error_log", d, fn, "message", lm, km, -1));
            } else {
                both.add(d);
            }
        }
        StringBuilder text = new StringBuilder("# kernel: ").append(release).append("\n# definitions (fuzz):\n");
        for (String d : both) text.append("#   ").append(d).append('\n');
        Set<String> names = new HashSet<>();
        for (String d : both) {
            String head = d.strip().split("\\s+")[0];
            if (head.contains(":")) names.add(head.substring(head.indexOf(':') + 1).replaceAll("^.*/", ""));
        }
        List<String> linuxLines = linux.traceLines().stream().filter(l -> names.contains(eventName(l))).toList();
        for (String l : linuxLines) text.append(l).append('\n');
        ReferenceTrace ref = ReferenceTrace.parse(text.toString(), arch, "Linux under QEMU");
        List<ReferenceTrace.Event> expected = CorpusGuest.window(ref.events());
        List<ReferenceTrace.Event> actual = CorpusGuest.window(ref.eventsOf(kpemu.traceLines().stream().filter(l -> names.contains(eventName(l))).toList()));
        TraceComparator.Result cmp = TraceComparator.compareEvents(expected, actual, TraceComparator.Mode.EXACT, TraceComparator.Context.LINUX);
        List<TraceComparator.Mismatch> ms = cmp.mismatches();
        if (expected.size() != actual.size() && !ms.isEmpty()) ms = List.of(ms.getFirst());
        for (TraceComparator.Mismatch m : ms) {
            ReferenceTrace.Event e = m.index() < expected.size() ? expected.get(m.index()) : actual.get(m.index());
            String fn = functionOf.getOrDefault(e.name(), "");
            out.add(new FuzzDifference("event", definitionOf.getOrDefault(e.name(), ""), fn, m.field(), m.expected(), m.actual(), m.index()));
        }
        return new Result(out, expected.size(), actual.size(), cmp.mismatches().size());
    }

    /** The event name of a trace line ("... name: (probe point) args"), or "". */
    static String eventName(String line) {
        int paren = line.indexOf(": (");
        if (paren < 0) return "";
        int start = line.lastIndexOf(' ', paren - 1);
        return line.substring(start + 1, paren);
    }

    /** error_log's message: what follows "error: " ("" when none). */
    static String message(String entry) {
        if (entry == null) return "";
        int i = entry.indexOf("error: ");
        return i < 0 ? entry.strip() : entry.substring(i + 7).strip();
    }
}
