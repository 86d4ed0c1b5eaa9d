package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.machine.Arch;

/**
 * The comparison done one event at a time against a golden read as it goes
 * ({@link RecordedTraceReader}, {@link StreamingTraceComparison}), as {@code kpemu boot --expect}
 * does: the diff's windows, counts and the missing events, all written by hand for a ten-event
 * trace; and the file written as events arrive ({@link RecordedTraceWriter}) is the one
 * {@link RecordedTrace#format} gives.
 */
class StreamingTraceComparisonTest {
    static final List<String> DEFS = List.of("p:ev do_sys_openat2 n=%di");

    static RecordedTrace.Header header() {
        return new RecordedTrace.Header(Arch.X86_64, "6.1.0-56-amd64", null, null, null, null, null, "0.1.0-SNAPSHOT",
                "console=ttyS0 nokaslr", null, null, "init_kprobe_trace", null, DEFS, List.of());
    }

    static String line(int i, int n) {
        return String.format("            init-1       [000] .....     1.%06d: ev: (do_sys_openat2+0x0/0x170) n=0x%x", 100 + i, n);
    }

    static List<String> golden() {
        List<String> l = new ArrayList<>();
        for (int i = 0; i < 10; i++) l.add(line(i, i));
        return l;
    }

    @Test
    void aGoldenReadAsItGoesGivesTheWholeTracesDiff(@TempDir Path tmp) throws Exception {
        Path file = tmp.resolve("golden.trace");
        try (RecordedTraceWriter w = new RecordedTraceWriter(file, Arch.X86_64, DEFS)) {
            for (String l : golden()) w.add(l);
            w.add("kpemu: not an event");                         // dropped, as format drops it
            w.finish(header());
        }
        assertEquals(RecordedTrace.format(header(), golden()), Files.readString(file), "spooled file = format's text");

        List<String> run = new ArrayList<>(golden());
        run.set(7, line(7, 0x77));                                  // #7 differs
        run.remove(9);                                              // #9 missing
        TraceComparison.Outcome o;
        try (RecordedTraceReader r = RecordedTraceReader.open(file)) {
            StreamingTraceComparison s = new StreamingTraceComparison(r.header(), r.source(), r, header(), "this run", TraceComparison.Choice.AUTO);
            Mapper m = new Mapper();
            for (String l : run) s.actual(m.event(l));
            assertFalse(s.matchesSoFar());
            o = s.finish();                                       // the golden's remaining event is read here: missing
        }
        String d = o.diff();
        assertTrue(d.startsWith("traces differ (EXACT, tasks, timestamps): expected 10 events (" + file + "), got 9 (this run)\n"), d);
        assertTrue(d.contains("first divergent event: #7\n"), d);
        // expected side: #4..#9, the earlier ones elided; actual side: #4..#8, the trace ends after
        assertTrue(d.contains("  expected:\n        ...\n      #4    init-1 [000] ..... 1.000104:"), d);
        assertTrue(d.contains("    > #7    init-1 [000] ..... 1.000107: ev: (do_sys_openat2+0x0/0x170) n=0x7\n"), d);
        assertTrue(d.contains("      #9    init-1 [000] ..... 1.000109: ev: (do_sys_openat2+0x0/0x170) n=0x9\n  actual:"), d);
        assertTrue(d.contains("    > #7    init-1 [000] ..... 1.000107: ev: (do_sys_openat2+0x0/0x170) n=0x77\n"
                + "      #8    init-1 [000] ..... 1.000108: ev: (do_sys_openat2+0x0/0x170) n=0x8\n  fields that differ at #7:\n"), d);
        assertTrue(d.contains("    argument n: expected 0x7, got 0x77\n"), d);
        assertTrue(d.contains("  ev                       expected 10, got 9\n"), d);
        assertTrue(d.contains("2 differences in 2 events:\n"), d);
        assertTrue(d.contains("  event #9 event: expected ev: (do_sys_openat2+0x0/0x170) n=0x9, got nothing (missing)\n"), d);

        // the same two traces compared whole give the same text
        RecordedTrace g = RecordedTrace.read(file), a = RecordedTrace.of(header(), run, "this run");
        assertEquals(d, TraceComparison.compare(g, a, TraceComparison.Choice.AUTO).diff());
    }

    @Test
    void aDamagedGoldenIsFoundWhileReading(@TempDir Path tmp) throws Exception {
        Path file = tmp.resolve("g.trace");
        Files.writeString(file, RecordedTrace.format(header(), golden()).replace("# events: 10", "# events: 11"));
        RecordedTrace.MalformedTraceException e = assertThrows(RecordedTrace.MalformedTraceException.class, () -> RecordedTraceReader.check(file));
        assertEquals(file + ": damaged: the header says 11 events, the file has 10", e.getMessage());
    }

    /** Parses run lines as the CLI's outputs do. */
    static final class Mapper {
        final java.util.Map<String, List<String>> names = ReferenceTrace.argumentNames(DEFS, Arch.X86_64);

        ReferenceTrace.Event event(String l) { return RecordedTrace.kept(l, names); }
    }
}
