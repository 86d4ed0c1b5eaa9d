package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.machine.Arch;

/** Recorded traces, their comparison and the semantic diff, on hand-made traces. */
class TraceComparisonTest {
    static final List<String> DEFS = List.of("p:myopen do_sys_openat2 dfd=%x0 fn=+0(%x1):ustring", "r:myret do_sys_openat2 ret=$retval");
    static final String B1 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", B2 = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    static RecordedTrace.Header header(Arch arch, String version, String buildId, List<String> defs) {
        return new RecordedTrace.Header(arch, "6.1.0-56-arm64", "linux-image-6.1.0-56-arm64", version, "vmlinuz", null, buildId,
                "0.1.0-SNAPSHOT", "console=ttyAMA0 nokaslr", "initramfs.cpio", "c".repeat(64), "init_kprobe_trace", null, defs,
                List.of(new RecordedTrace.Phase("boot", 0, 1_400_000_000L), new RecordedTrace.Phase("init", 1_400_000_000L, 2_000_000_000L)));
    }

    static final List<String> LINES = List.of(
            "kpemu: guest starts 1.20 s after boot()",
            "            init-1       [000] .....     1.455730: myopen: (do_sys_openat2+0x0/0x190) dfd=0xffffffffffffff9c fn=\"/init\"",
            "            init-1       [000] .....     1.455734: myret: (__arm64_sys_openat+0x70/0xbc <- do_sys_openat2) ret=0x3",
            "             cat-82      [000] .....     1.459459: myopen: (do_sys_openat2+0x0/0x190) dfd=0xffffffffffffff9c fn=\"/proc/version\"",
            "             cat-82      [000] .....     1.459479: myret: (__arm64_sys_openat+0x70/0xbc <- do_sys_openat2) ret=0x3",
            "            init-1       [000] .....     1.459749: myopen: (do_sys_openat2+0x0/0x190) dfd=0xffffffffffffff9c fn=\"/hello.txt\"",
            "            init-1       [000] .....     1.459760: myret: (__arm64_sys_openat+0x70/0xbc <- do_sys_openat2) ret=0x3",
            "kpemu: guest powered off");

    static RecordedTrace trace(RecordedTrace.Header h, List<String> lines) { return RecordedTrace.of(h, lines, "t"); }

    @Test
    void aRecordedFileReadsBackWithItsHeaderAndContexts(@TempDir Path tmp) throws Exception {
        Path f = tmp.resolve("g.trace");
        RecordedTrace.write(f, header(Arch.ARM64, "6.1.192-2", B1, DEFS), LINES);
        String text = Files.readString(f);
        assertTrue(text.contains("# events: 6\n"), text);
        assertFalse(text.contains("guest starts"), "kpemu's own lines are not events: " + text);
        RecordedTrace t = RecordedTrace.read(f);
        assertEquals(6, t.events().size());
        assertEquals("cat", t.events().get(2).context().comm());
        assertEquals(82, t.events().get(2).context().pid());
        assertEquals(1_459_459_000L, t.events().get(2).context().timestampNanos());
        assertEquals("6.1.192-2", t.header().packageVersion());
        assertEquals(B1, t.header().buildId());
        assertEquals("c".repeat(64), t.header().initramfsSha256());
        assertEquals("initramfs.cpio", t.header().initramfs());
        assertEquals(DEFS, t.header().definitions());
        assertEquals(1_400_000_000L, t.header().phases().get(1).startNanos());
        assertTrue(TraceComparison.compare(t, trace(header(Arch.ARM64, "6.1.192-2", B1, DEFS), LINES), TraceComparison.Choice.AUTO).matches());
    }

    @Test
    void damagedOrForeignFilesAreOneLineErrors(@TempDir Path tmp) throws Exception {
        Path f = tmp.resolve("g.trace");
        Files.writeString(f, "hello\n");
        var e = assertThrows(RecordedTrace.MalformedTraceException.class, () -> RecordedTrace.read(f));
        assertTrue(e.getMessage().contains("not a kpemu trace"), e.getMessage());
        String good = RecordedTrace.format(header(Arch.ARM64, "v", B1, DEFS), LINES);
        Files.writeString(f, good.substring(0, good.lastIndexOf("init-1")));          // truncated
        e = assertThrows(RecordedTrace.MalformedTraceException.class, () -> RecordedTrace.read(f));
        assertTrue(e.getMessage().contains("header says 6 events, the file has 5"), e.getMessage());
        Files.writeString(f, good.replace("# arch: arm64", "# arch: sparc"));
        e = assertThrows(RecordedTrace.MalformedTraceException.class, () -> RecordedTrace.read(f));
        assertEquals(1, e.getMessage().lines().count());
    }

    @Test
    void theDiffNamesTheFirstDivergentEventWithContextCountsAndFields() {
        RecordedTrace golden = trace(header(Arch.ARM64, "v", B1, DEFS), LINES);
        List<String> changed = new java.util.ArrayList<>(LINES);
        changed.set(5, changed.get(5).replace("/hello.txt", "/etc/passwd"));   // event #4
        changed.remove(6);                                                      // event #5 missing
        TraceComparison.Outcome o = TraceComparison.compare(golden, trace(header(Arch.ARM64, "v", B1, DEFS), changed), TraceComparison.Choice.AUTO);
        assertFalse(o.matches());
        String d = o.diff();
        assertTrue(d.startsWith("traces differ (EXACT, tasks, timestamps): expected 6 events (t), got 5 (t)"), d);
        assertTrue(d.contains("first divergent event: #4\n"), d);
        assertTrue(d.contains("    > #4    init-1 [000] ..... 1.459749: myopen: (do_sys_openat2+0x0/0x190) dfd=0xffffffffffffff9c fn=\"/hello.txt\""), d);
        assertTrue(d.contains("    > #4    init-1 [000] ..... 1.459749: myopen: (do_sys_openat2+0x0/0x190) dfd=0xffffffffffffff9c fn=\"/etc/passwd\""), d);
        assertTrue(d.contains("      #1    init-1 [000] ..... 1.455734: myret:"), "context before: " + d);
        assertTrue(d.contains("      #5    init-1 [000] ..... 1.459760: myret:"), "context after on the expected side: " + d);
        assertTrue(d.contains("    argument fn: expected \"/hello.txt\", got \"/etc/passwd\"\n"), d);
        assertTrue(d.contains("per-event counts that differ:\n  myret                    expected 3, got 2\n"), d);
        assertTrue(d.contains("2 differences in 2 events:"), d);
        AssertionError ae = assertThrows(AssertionError.class, () -> TraceAssert.assertTraceMatches(golden,
                trace(header(Arch.ARM64, "v", B1, DEFS), changed)));
        assertEquals(d, ae.getMessage());
    }

    @Test
    void sameBuildAndWorkloadComparesTimestampsAndTasks() {
        RecordedTrace golden = trace(header(Arch.ARM64, "v", B1, DEFS), LINES);
        List<String> later = LINES.stream().map(l -> l.replace("1.459479", "1.459480")).toList();
        TraceComparison.Outcome o = TraceComparison.compare(golden, trace(header(Arch.ARM64, "v", B1, DEFS), later), TraceComparison.Choice.AUTO);
        assertEquals(List.of(new TraceComparator.Mismatch(3, "timestamp", "1.459479", "1.459480")), o.result().mismatches());
        List<String> pid = LINES.stream().map(l -> l.replace("cat-82 ", "cat-83 ")).toList();
        o = TraceComparison.compare(golden, trace(header(Arch.ARM64, "v", B1, DEFS), pid), TraceComparison.Choice.AUTO);
        assertEquals(2, o.result().mismatches().size(), o.diff());
        assertEquals("task", o.result().mismatches().get(0).field());
        // x86-64 too: guest time is deterministic there (rdtsc reads the virtual clock)
        RecordedTrace gx = trace(header(Arch.X86_64, "v", B1, xdefs()), xlines(LINES));
        o = TraceComparison.compare(gx, trace(header(Arch.X86_64, "v", B1, xdefs()), xlines(later)), TraceComparison.Choice.AUTO);
        assertEquals(List.of(new TraceComparator.Mismatch(3, "timestamp", "1.459479", "1.459480")), o.result().mismatches());
    }

    static List<String> xdefs() { return List.of("p:myopen do_sys_openat2 dfd=%di fn=+0(%si):ustring", "r:myret do_sys_openat2 ret=$retval"); }

    static List<String> xlines(List<String> l) { return l; }

    @Test
    void anotherBuildOfTheKernelIsComparedTolerantly() {
        RecordedTrace golden = trace(header(Arch.ARM64, "6.1.192-2", B1, DEFS), LINES);
        List<String> rebuilt = LINES.stream().map(l -> l.replace("/0x190)", "/0x1a0)").replace("+0x70/0xbc", "+0x74/0xc0")
                .replace("1.459479", "1.459501")).toList();
        RecordedTrace other = trace(header(Arch.ARM64, "6.1.193-1", B2, DEFS), rebuilt);
        TraceComparison.Outcome auto = TraceComparison.compare(golden, other, TraceComparison.Choice.AUTO);
        assertTrue(auto.matches(), auto.diff());
        assertEquals(TraceComparator.Mode.TOLERANT, auto.result().mode());
        assertTrue(auto.diff().contains("note: different kernel builds: 6.1.0-56-arm64 (6.1.192-2) build-id aaaaaaaaaaaa vs 6.1.0-56-arm64 (6.1.193-1) build-id bbbbbbbbbbbb"), auto.diff());
        TraceComparison.Outcome exact = TraceComparison.compare(golden, other, TraceComparison.Choice.EXACT);
        assertFalse(exact.matches());
        assertEquals("probe point", exact.result().mismatches().getFirst().field(), exact.diff());
        assertTrue(exact.diff().contains("note: timestamps not compared (different kernel builds)"), exact.diff());
        assertFalse(exact.diff().contains("timestamp:"), "another build: no timestamps compared: " + exact.diff());
        // the fn argument is no symbol: it must be equal in tolerant mode too
        RecordedTrace wrong = trace(header(Arch.ARM64, "6.1.193-1", B2, DEFS), rebuilt.stream().map(l -> l.replace("/init", "/sbin/init")).toList());
        assertFalse(TraceComparison.compare(golden, wrong, TraceComparison.Choice.AUTO).matches());
    }

    @Test
    void differentArchesCannotBeCompared() {
        RecordedTrace a = trace(header(Arch.ARM64, "v", B1, DEFS), LINES);
        RecordedTrace x = trace(header(Arch.X86_64, "v", B1, xdefs()), LINES);
        var e = assertThrows(IllegalArgumentException.class, () -> TraceComparison.compare(a, x, TraceComparison.Choice.AUTO));
        assertTrue(e.getMessage().contains("different arches"), e.getMessage());
    }
}
