package dev.kpemu.tests;

import static dev.kpemu.tests.KpemuInProcess.kpemu;

import dev.kpemu.tests.KpemuInProcess.Run;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;


import dev.kpemu.cli.ExitCodes;
import dev.kpemu.kprobes.events.RecordedTrace;
import dev.kpemu.kprobes.events.TraceAssert;
import dev.kpemu.kprobes.events.TraceComparator;
import dev.kpemu.kprobes.events.TraceComparison;

/**
 * Users' own goldens, on a real kernel (Debian's default arm64 kernel, kpemu's busybox workload):
 * {@code kpemu boot --record} once, then a second run with {@code --expect} is equal (exit 0, the
 * timestamps included: guest time), a changed definition gives a diff naming the first divergent
 * event and exit 5, and a golden whose header names another Debian build of the kernel (made here
 * by editing the recorded file's header and symbol sizes) is equal in tolerant mode and not in
 * exact mode. Three boots in all.
 */
@Tag("kernel")
class RecordedTraceRegressionTest {
    static final List<String> DEFS = List.of("p:myopen do_sys_openat2 dfd=%x0 fn=+0(%x1):ustring", "r:myret do_sys_openat2 ret=$retval");


    static Run boot(Path dir, List<String> defs, String... more) {
        List<String> args = new java.util.ArrayList<>(List.of("boot", "--arch", "arm64", "--console", dir.resolve("console.txt").toString()));
        for (String d : defs) args.addAll(List.of("-e", d));
        args.addAll(List.of(more));
        return kpemu(args.toArray(String[]::new));
    }

    @TempDir static Path dir;
    static Path golden;
    static Run recorded;

    @BeforeAll
    static void recordAGolden() {
        golden = dir.resolve("golden.trace");
        recorded = boot(dir, DEFS, "--record", golden.toString());
    }

    @Test
    void aSecondRunEqualsTheGolden() throws Exception {
        assertEquals(ExitCodes.OK, recorded.code(), recorded.err());
        RecordedTrace g = RecordedTrace.read(golden);
        assertTrue(g.events().size() > 20, "the workload hits the probes: " + g.events().size());
        assertEquals("init_kprobe_trace", g.header().registeredAt());
        assertTrue(g.header().buildId() != null && g.header().buildId().matches("[0-9a-f]{40}"), "build-id: " + g.header().buildId());
        assertEquals(2, g.header().phases().size());
        // the trace lines still go to stdout, kpemu's own lines to stderr
        assertEquals(g.events().size(), recorded.out().lines().filter(l -> l.contains(": myopen: (") || l.contains(": myret: (")).count());
        assertTrue(recorded.err().contains("kpemu: recorded " + g.events().size() + " events to " + golden), recorded.err());

        Path second = dir.resolve("second.trace");
        Run again = boot(dir, DEFS, "--expect", golden.toString(), "--record", second.toString());
        assertEquals(ExitCodes.OK, again.code(), again.err());
        assertTrue(again.err().contains("traces equal (EXACT, tasks, timestamps): " + g.events().size() + " events"), again.err());
        Run cmp = kpemu("compare", golden.toString(), second.toString());
        assertEquals(ExitCodes.OK, cmp.code(), cmp.out() + cmp.err());
        TraceAssert.assertTraceMatches(golden, second);
    }

    @Test
    void aChangedDefinitionNamesTheFirstDivergentEventAndExitsFive() {
        List<String> changed = List.of(DEFS.get(0), "r:myret do_sys_openat2 ret=$retval:s32");
        Run r = boot(dir, changed, "--expect", golden.toString());
        assertEquals(ExitCodes.TRACE_DIFFERS, r.code(), r.err());
        assertTrue(r.err().contains("note: definitions differ, first at #2: r:myret do_sys_openat2 ret=$retval  vs  r:myret do_sys_openat2 ret=$retval:s32"), r.err());
        assertTrue(r.err().contains("first divergent event: #1\n"), r.err());
        assertTrue(r.err().contains("    argument ret: expected 0x3, got 3\n"), r.err());
        assertTrue(r.err().contains("    > #1    init-1 [000] ..... "), r.err());
        assertTrue(r.err().contains("per-event counts: all equal"), r.err());
    }

    @Test
    void anotherDebianBuildOfTheKernelIsEqualTolerantlyNotExactly() throws Exception {
        assertEquals(ExitCodes.OK, recorded.code(), recorded.err());
        // made by hand from the recorded file: another package version and build (build-id, file hash), symbols a rebuild resized
        String text = Files.readString(golden);
        RecordedTrace g = RecordedTrace.read(golden);
        String other = text.replace("version=" + g.header().packageVersion(), "version=6.1.999-1")
                .replace(g.header().buildId(), "0".repeat(40)).replace(g.header().kernelSha256(), "1".repeat(64))
                .replace("(do_sys_openat2+0x0/0x190)", "(do_sys_openat2+0x0/0x1a0)")
                .replace("__arm64_sys_openat+0x70/0xbc ", "__arm64_sys_openat+0x74/0xc0 ");
        assertFalse(other.equals(text));
        Path rebuilt = dir.resolve("rebuilt.trace");
        Files.writeString(rebuilt, other);
        Run tolerant = kpemu("compare", rebuilt.toString(), golden.toString());
        assertEquals(ExitCodes.OK, tolerant.code(), tolerant.out());
        assertTrue(tolerant.out().startsWith("traces equal (TOLERANT): "), tolerant.out());
        Run exact = kpemu("compare", "--mode", "exact", rebuilt.toString(), golden.toString());
        assertEquals(ExitCodes.TRACE_DIFFERS, exact.code(), exact.out());
        assertTrue(exact.out().contains("first divergent event: #0\n"), exact.out());
        assertTrue(exact.out().contains("probe point: expected do_sys_openat2+0x0/0x1a0, got do_sys_openat2+0x0/0x190"), exact.out());
        TraceComparison.Outcome o = TraceComparison.compare(RecordedTrace.read(rebuilt), g, TraceComparison.Choice.AUTO);
        assertEquals(TraceComparator.Mode.TOLERANT, o.result().mode());
    }
}
