package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

/**
 * {@code kpemu check-events} expands a glob in the probed symbol as {@code kpemu boot} does
 * ({@link dev.kpemu.kprobes.events.ProbeGlob}): every match Linux would accept listed as
 * kprobe_events lists it (a probe written without a name is {@code p_<function>_<offset>}), the
 * refused ones counted in one summary line on stderr; nothing matching is exit 2.
 */
class CheckEventsGlobTest {
    @Test
    void aGlobListsTheAcceptedMatchesAndSumsUpTheRefusedOnes() {
        CliTest.Run r = CliTest.run("check-events", "--arch", "x86_64", "-e", "p:vfs/ vfs_*");
        assertEquals(ExitCodes.OK, r.code(), r.out() + r.err());
        List<String> listed = r.out().lines().toList();
        assertTrue(listed.contains("p:vfs/p_vfs_read_0 vfs_read"), r.out());
        assertTrue(listed.stream().allMatch(l -> l.matches("p:vfs/p_vfs_\\w+_0 vfs_\\w+")), r.out());
        Matcher m = Pattern.compile("kpemu: p:vfs/ vfs_\\*: (\\d+) probes, (\\d+) skipped as Linux refuses them \\((.*)\\)").matcher(r.err().strip());
        assertTrue(m.matches(), r.err());
        assertEquals(listed.size(), Integer.parseInt(m.group(1)), "the summary counts the listed probes");
        assertTrue(m.group(3).contains("Could not probe notrace function"), r.err());
    }

    @Test
    void aGlobThatMatchesNothingIsAUsageError() {
        CliTest.Run r = CliTest.run("check-events", "--arch", "x86_64", "-e", "p:none/ no_such_prefix_at_all_*");
        assertEquals(ExitCodes.USAGE, r.code(), r.out() + r.err());
        assertEquals("", r.out());
        assertTrue(r.err().contains("no function matches"), r.err());
        CliTest.Run syntax = CliTest.run("check-events", "--syntax-only", "-e", "p:vfs/ vfs_*");
        assertEquals(ExitCodes.USAGE, syntax.code(), syntax.out() + syntax.err());
        assertTrue(syntax.err().startsWith("kpemu: ") && syntax.err().strip().lines().count() == 1, syntax.err());
    }
}
