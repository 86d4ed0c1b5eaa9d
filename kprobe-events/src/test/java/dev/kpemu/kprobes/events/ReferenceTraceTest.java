package dev.kpemu.kprobes.events;

import dev.kpemu.machine.Arch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;

/** {@link ReferenceTrace} and {@link TraceComparator}: the recorded traces and the comparison rule. */
class ReferenceTraceTest {
    private static final String TEXT = """
            # Reference trace recorded by guest-images/record-reference.sh from Linux's own kprobe_events.
            # kernel: 6.1.0-56-amd64 (package=linux-image-6.1.0-56-amd64 version=6.1.192-2 )
            # qemu: QEMU emulator version 7.2.22
            # definitions (open.x86_64.events):
            #   p:myopen do_sys_openat2 dfd=%di fn=+0(%si):ustring
            #   r:myret do_sys_openat2 ret=$retval
            # One line per event, in order, as the console printed it without the timestamp.
            myopen: (do_sys_openat2+0x0/0x170) dfd=0xffffff9c fn="/init"
            myret: (__x64_sys_openat+0x6a/0xa0 <- do_sys_openat2) ret=0x3
            myopen: (do_sys_openat2+0x0/0x170) dfd=0xffffff9c fn="/tmp/a b" fn2=x"
            myret: (__x64_sys_openat+0x6a/0xa0 <- do_sys_openat2) ret=0xfffffffffffffffe
            """;

    private static ReferenceTrace ref() { return ReferenceTrace.parse(TEXT, Arch.X86_64, "test"); }

    @Test
    void headerAndEventsParse() {
        ReferenceTrace r = ref();
        assertEquals("6.1.0-56-amd64", r.kernelRelease());
        assertEquals("linux-image-6.1.0-56-amd64", r.packageName());
        assertEquals("6.1.192-2", r.packageVersion());
        assertEquals(List.of("p:myopen do_sys_openat2 dfd=%di fn=+0(%si):ustring", "r:myret do_sys_openat2 ret=$retval"), r.definitions());
        assertEquals(List.of("myopen", "myret"), r.eventNames());
        assertEquals(Map.of("myopen", List.of("dfd", "fn"), "myret", List.of("ret")), r.argumentNames());
        assertTrue(r.isReturnEvent("myret"));
        assertEquals(4, r.events().size());
        ReferenceTrace.Event e0 = r.events().get(0), e1 = r.events().get(1), e2 = r.events().get(2);
        assertEquals("myopen", e0.name());
        assertEquals("do_sys_openat2+0x0/0x170", e0.probePoint());
        assertNull(e0.function());
        assertEquals(List.of(new ReferenceTrace.Arg("dfd", "0xffffff9c"), new ReferenceTrace.Arg("fn", "\"/init\"")), e0.args());
        assertTrue(e1.isReturn());
        assertEquals("__x64_sys_openat+0x6a/0xa0", e1.probePoint());
        assertEquals("do_sys_openat2", e1.function());
        // the last argument of a known event runs to the end of the line: a string may hold anything
        assertEquals("\"/tmp/a b\" fn2=x\"", e2.args().get(1).value());
    }

    @Test
    void kpemuLinesInEveryForm() {
        Map<String, List<String>> names = Map.of("myopen", List.of("dfd", "fn"));
        String body = "myopen: (do_sys_openat2+0x0/0x170) dfd=0x1 fn=\"a b\"";
        for (String l : List.of(body, "[    2.049993] " + body,
                "           <...>-1       [000] d.... 1234.567890: " + body,
                "      kpemu-test-42      (     41) [000] ..... 0.000001: " + body)) {
            ReferenceTrace.Event e = ReferenceTrace.parseEvent(l, names);
            assertNotNull(e, l);
            assertEquals(body, e.body());
            assertEquals(List.of(new ReferenceTrace.Arg("dfd", "0x1"), new ReferenceTrace.Arg("fn", "\"a b\"")), e.args());
        }
        // without the definitions: quoted strings to their closing quote, arrays to their brace
        ReferenceTrace.Event e = ReferenceTrace.parseEvent("ev: (f+0x4/0x10 [mod]) s=\"x y\" a={1,2} c='q' z=(fault)", Map.of());
        assertEquals("f+0x4/0x10 [mod]", e.probePoint());
        assertEquals("[s=\"x y\", a={1,2}, c='q', z=(fault)]", e.args().toString());
        assertNull(ReferenceTrace.parseEvent("KPEMU-INIT-DONE", Map.of()));
        assertNull(ReferenceTrace.parseEvent("[    1.000000] Run /init as init process", Map.of()));
    }

    @Test
    void identicalLinesMatchExactly() {
        ReferenceTrace r = ref();
        List<String> lines = new ArrayList<>(TEXT.lines().filter(l -> !l.startsWith("#")).toList());
        lines.add(1, "KPEMU-INIT-START");                            // other output is skipped
        lines.add(2, "other: (x+0x0/0x1) a=1");                       // as are events of other definitions
        TraceComparator.Result res = TraceComparator.compare(r, lines, "6.1.0-56-amd64", "6.1.192-2");
        assertEquals(TraceComparator.Mode.EXACT, res.mode());
        assertTrue(res.matches(), res.report());
        assertEquals(4, res.actualEvents());
    }

    @Test
    void modeFollowsTheKernelBuild() {
        ReferenceTrace r = ref();
        assertEquals(TraceComparator.Mode.EXACT, TraceComparator.mode(r, "6.1.0-56-amd64", null));
        assertEquals(TraceComparator.Mode.EXACT, TraceComparator.mode(r, "6.1.0-56-amd64", "6.1.192-2"));
        assertEquals(TraceComparator.Mode.TOLERANT, TraceComparator.mode(r, "6.1.0-56-amd64", "6.1.192-3"));
        assertEquals(TraceComparator.Mode.TOLERANT, TraceComparator.mode(r, "6.1.0-57-amd64", "6.1.193-1"));
        assertEquals(TraceComparator.Mode.TOLERANT, TraceComparator.mode(r, null, null));
    }

    private static List<String> lines(String... l) { return List.of(l); }

    @Test
    void aRebuiltKernelIsToleratedWhereTheRuleSays() {
        ReferenceTrace r = ReferenceTrace.parse("""
                # kernel: 6.1.0-56-amd64 (package=linux-image-6.1.0-56-amd64 version=6.1.192-2 )
                # definitions (t.x86_64.events):
                #   p:myopen do_sys_openat2 dfd=%di where=%ip:symbol
                #   r:myret do_sys_openat2 ret=$retval
                myopen: (do_sys_openat2+0x0/0x170) dfd=0xffffff9c where=do_sys_openat2+0x1/0x170
                myret: (__x64_sys_openat+0x6a/0xa0 <- do_sys_openat2) ret=0x3
                """, Arch.X86_64, "t");
        List<String> rebuilt = lines("myopen: (do_sys_openat2+0x0/0x180) dfd=0xffffff9c where=do_sys_openat2+0x1/0x180",
                "myret: (__x64_sys_openat+0x72/0xa8 <- do_sys_openat2) ret=0x3");
        assertTrue(TraceComparator.compare(r, rebuilt, TraceComparator.Mode.TOLERANT).matches());
        TraceComparator.Result exact = TraceComparator.compare(r, rebuilt, TraceComparator.Mode.EXACT);
        assertEquals(List.of("probe point", "argument where", "return site"),
                exact.mismatches().stream().map(TraceComparator.Mismatch::field).toList(), exact.report());

        // never tolerated: another probe offset, another caller or function, another value, another count
        TraceComparator.Result bad = TraceComparator.compare(r, lines(
                "myopen: (do_sys_openat2+0x4/0x180) dfd=0xffffff9d where=other_fn+0x1/0x170",
                "myret: (__ia32_sys_openat+0x6a/0xa0 <- do_sys_open) ret=0x3",
                "myret: (__x64_sys_openat+0x6a/0xa0 <- do_sys_openat2) ret=0x3"), TraceComparator.Mode.TOLERANT);
        assertEquals(List.of("probe point", "argument dfd", "argument where", "return site", "probed function", "event"),
                bad.mismatches().stream().map(TraceComparator.Mismatch::field).toList(), bad.report());
        assertEquals(0, bad.mismatches().getFirst().index());
        assertEquals(2, bad.mismatches().getLast().index());
        assertTrue(bad.report().startsWith("MISMATCH (TOLERANT comparison): 3 events, reference 2\n"), bad.report());
        assertTrue(bad.report().contains("event #0 argument dfd: expected 0xffffff9c, got 0xffffff9d"), bad.report());

        TraceComparator.Result missing = TraceComparator.compare(r, lines(
                "myret: (__x64_sys_openat+0x6a/0xa0 <- do_sys_openat2) ret=0x3"), TraceComparator.Mode.TOLERANT);
        assertEquals(List.of("event name", "event"), missing.mismatches().stream().map(TraceComparator.Mismatch::field).toList());
    }

    static Path reference() { return RecordedReferenceTest.reference(); }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void theRepositorysRecordedTraces(Arch a) throws Exception {
        Path dir = reference();
        org.junit.jupiter.api.Assumptions.assumeTrue(dir != null, "no recorded reference in this checkout");
        ReferenceTrace r = ReferenceTrace.read(dir, a, "open", "6.1.0-56-" + (a == Arch.X86_64 ? "amd64" : "arm64"));
        assertTrue(r.kernelRelease().startsWith("6.1.0-"), r.kernelRelease());
        assertTrue(r.kernelRelease().endsWith(a == Arch.X86_64 ? "-amd64" : "-arm64"));
        assertNotNull(r.packageVersion());
        // the header's definitions are the .events file's
        List<String> defs = Files.readAllLines(ReferenceTrace.definitionsPath(dir, a, "open")).stream()
                .map(String::trim).filter(l -> !l.isEmpty() && !l.startsWith("#")).toList();
        assertEquals(defs, r.definitions());
        assertFalse(r.events().isEmpty());
        assertEquals(0, r.events().size() % 2);
        for (int i = 0; i < r.events().size(); i += 2) {
            ReferenceTrace.Event open = r.events().get(i), ret = r.events().get(i + 1);
            assertEquals("myopen", open.name());
            assertTrue(open.probePoint().startsWith("do_sys_openat2+0x0/0x"), open.body());
            assertEquals(List.of("dfd", "fn"), open.args().stream().map(ReferenceTrace.Arg::name).toList());
            assertTrue(open.args().get(1).value().startsWith("\""), open.body());
            assertEquals("do_sys_openat2", ret.function());
            assertEquals("ret", ret.args().getFirst().name());
        }
        List<String> raw = Files.readAllLines(ReferenceTrace.tracePath(dir, a, "open", r.kernelRelease()));
        assertTrue(TraceComparator.compare(r, raw, r.kernelRelease(), r.packageVersion()).matches());
    }

    /** The whole chain on a bare-metal guest: definitions, probe hits, kpemu's lines against a hand-written reference. */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void kpemuOutputAgainstAHandWrittenReference(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            String defs = k.script("p:myopen kprobe_target dfd=R0 fn=+0(R1):ustring\nr:myret kprobe_target ret=$retval");
            String caller = a == Arch.X86_64 ? "rel32_call+0x9/0x100" : "bl_func+0xc/0x100";
            String text = "# kernel: kpemu-bare-metal (package=none version=1 )\n# definitions (t." + a.linuxName() + ".events):\n"
                    + defs.lines().map(l -> "#   " + l + "\n").reduce("", String::concat)
                    + "myopen: (kprobe_target+0x0/0x100) dfd=0xffffff9c fn=\"/init\"\n"
                    + "myret: (" + caller + " <- kprobe_target) ret=0x55555534\n"
                    + "myopen: (kprobe_target+0x0/0x100) dfd=0x63 fn=\"/etc/my file\"\n"
                    + "myret: (" + caller + " <- kprobe_target) ret=0x21\n";
            ReferenceTrace r = ReferenceTrace.parse(text, a, "hand");
            k.engine.write(String.join("\n", r.definitions()));
            k.engine.enableAll();
            k.writeUserString(GuestKernel.USER, "/init");
            k.writeUserString(GuestKernel.USER + 0x100, "/etc/my file");
            String fn = a == Arch.X86_64 ? "rel32_call" : "bl_func";
            k.call(fn, 0xffffff9cL, GuestKernel.USER);
            k.call(fn, 0x63, GuestKernel.USER + 0x100);
            TraceComparator.Result res = TraceComparator.compare(r, k.lines(), "kpemu-bare-metal", "1");
            assertEquals(TraceComparator.Mode.EXACT, res.mode());
            assertTrue(res.matches(), res.report() + String.join("\n", k.lines()));
        }
    }

    @org.junit.jupiter.api.Test
    void referencesAreKeptPerKernelSeries() throws Exception {
        assertEquals("6.1", ReferenceTrace.series("6.1.0-56-amd64"));
        assertEquals("6.12", ReferenceTrace.series("6.12.117+deb13-arm64"));
        assertEquals("7.2", ReferenceTrace.series("7.2.13+deb14-amd64"));
        assertEquals("6.19", ReferenceTrace.series("6.19"));
        assertThrows(IllegalArgumentException.class, () -> ReferenceTrace.series("linux"));
        Path dir = Path.of("/r");
        assertEquals(Path.of("/r/arm64/6.12/open.trace"), ReferenceTrace.tracePath(dir, Arch.ARM64, "open", "6.12.117+deb13-arm64"));
        java.nio.file.NoSuchFileException e = assertThrows(java.nio.file.NoSuchFileException.class,
                () -> ReferenceTrace.read(dir, Arch.X86_64, "open", "7.2.13+deb14-amd64"));
        assertTrue(e.getMessage().contains("no reference 'open' recorded for kernel 7.2"), e.getMessage());
    }
}
