package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.kprobes.events.RecordedTrace;

/** {@code kpemu compare} and {@code kpemu convert} on hand-made traces: exit codes, the diff on stdout, bad files. */
class CompareCommandTest {
    static Path write(Path dir, String name, String text) throws Exception {
        Path p = dir.resolve(name);
        Files.writeString(p, text);
        return p;
    }

    static String golden() { return RecordedTrace.format(PerfettoTraceTest.trace().header(), PerfettoTraceTest.LINES); }

    @Test
    void equalTracesExitZeroAndDifferentOnesExitTraceDiffers(@TempDir Path tmp) throws Exception {
        Path g = write(tmp, "g.trace", golden());
        CliTest.Run same = CliTest.run("compare", g.toString(), write(tmp, "same.trace", golden()).toString());
        assertEquals(ExitCodes.OK, same.code(), same.out() + same.err());
        assertTrue(same.out().startsWith("traces equal (EXACT, tasks, timestamps): 8 events"), same.out());
        Path changed = write(tmp, "c.trace", golden().replace("fn=\"/c\"", "fn=\"/d\""));
        CliTest.Run diff = CliTest.run("compare", g.toString(), changed.toString());
        assertEquals(ExitCodes.TRACE_DIFFERS, diff.code(), diff.out() + diff.err());
        assertEquals(5, ExitCodes.TRACE_DIFFERS);
        assertTrue(diff.out().contains("first divergent event: #2\n"), diff.out());
        assertTrue(diff.out().contains("    argument fn: expected \"/c\", got \"/d\"\n"), diff.out());
        assertEquals("", diff.err());
    }

    @Test
    void tolerantAndExactModesOnAnotherBuild(@TempDir Path tmp) throws Exception {
        Path g = write(tmp, "g.trace", golden());
        Path other = write(tmp, "o.trace", golden().replace("version=6.1.192-2", "version=6.1.193-1").replace("/0x170)", "/0x180)"));
        assertEquals(ExitCodes.OK, CliTest.run("compare", g.toString(), other.toString()).code());
        CliTest.Run exact = CliTest.run("compare", "--mode", "exact", g.toString(), other.toString());
        assertEquals(ExitCodes.TRACE_DIFFERS, exact.code(), exact.out());
        assertTrue(exact.out().contains("probe point: expected do_sys_openat2+0x0/0x170, got do_sys_openat2+0x0/0x180"), exact.out());
        assertEquals(ExitCodes.USAGE, CliTest.run("compare", "--mode", "fuzzy", g.toString(), other.toString()).code());
    }

    @Test
    void badInputIsOneLineOnStderrAndADefinedExitCode(@TempDir Path tmp) throws Exception {
        Path g = write(tmp, "g.trace", golden());
        CliTest.Run missing = CliTest.run("compare", g.toString(), tmp.resolve("nope.trace").toString());
        assertEquals(ExitCodes.USAGE, missing.code());
        assertTrue(missing.err().startsWith("kpemu: no such file: "), missing.err());
        CliTest.Run corrupt = CliTest.run("compare", g.toString(), write(tmp, "bad.trace", "garbage\n").toString());
        assertEquals(ExitCodes.ERROR, corrupt.code());
        assertEquals(1, corrupt.err().lines().count(), corrupt.err());
        assertTrue(corrupt.err().contains("not a kpemu trace"), corrupt.err());
        String text = golden();
        CliTest.Run truncated = CliTest.run("compare", g.toString(), write(tmp, "t.trace", text.substring(0, text.length() - 60)).toString());
        assertEquals(ExitCodes.ERROR, truncated.code(), truncated.err());
        assertEquals(1, truncated.err().lines().count(), truncated.err());
        Path arm = write(tmp, "arm.trace", text.replace("# arch: x86_64", "# arch: arm64").replace("%di", "%x0").replace("%si", "%x1"));
        CliTest.Run arches = CliTest.run("compare", g.toString(), arm.toString());
        assertEquals(ExitCodes.USAGE, arches.code(), arches.err());
        assertTrue(arches.err().startsWith("kpemu: cannot compare: ") && arches.err().lines().count() == 1, arches.err());
        CliTest.Run noDefs = CliTest.run("boot", "--arch", "x86_64", "--expect", g.toString());
        assertEquals(ExitCodes.USAGE, noDefs.code());
        CliTest.Run wrongArch = CliTest.run("boot", "--arch", "arm64", "--expect", g.toString(), "-e", "p do_sys_openat2");
        assertEquals(ExitCodes.USAGE, wrongArch.code(), wrongArch.err());
        assertEquals("kpemu: " + g + " was recorded on x86_64, this boot is arm64\n", wrongArch.err());
        CliTest.Run badGolden = CliTest.run("boot", "--arch", "x86_64", "--expect", tmp.resolve("bad.trace").toString(), "-e", "p do_sys_openat2");
        assertEquals(ExitCodes.ERROR, badGolden.code());
        assertEquals(1, badGolden.err().lines().count(), badGolden.err());
    }

    @Test
    void convertWritesPerfettoJson(@TempDir Path tmp) throws Exception {
        Path g = write(tmp, "g.trace", golden());
        Path out = tmp.resolve("g.json");
        CliTest.Run r = CliTest.run("convert", "--format", "perfetto", g.toString(), "-o", out.toString());
        assertEquals(ExitCodes.OK, r.code(), r.err());
        assertEquals("kpemu: perfetto JSON: 2 task tracks, 5 instants, 3 slices, 2 phases\n", r.err());
        assertTrue(new com.fasterxml.jackson.databind.ObjectMapper().readTree(out.toFile()).get("traceEvents").size() > 10);
    }
}
