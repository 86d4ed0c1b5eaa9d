package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@code kpemu bench boot} runs on a booted kernel and reports every row (not timed: the figures
 * are whatever the machine gives; only their presence and the run's facts are checked). Arm64,
 * the faster boot, with small cold counts.
 */
@Tag("kernel")
@Tag("scale")
class BenchBootTest {
    @Test
    void everyRowIsReported() {
        CliTest.Run r = CliTest.run("bench", "boot", "--arch", "arm64", "--cold", "10,50", "--repeat", "1");
        assertEquals(ExitCodes.OK, r.code(), r.out() + r.err());
        assertTrue(r.err().contains("kpemu: bench boot arm64 survey: "), r.err());
        Pattern row = Pattern.compile("arm64\\s+(.+?)\\s+(\\d+)\\s+(\\d+)\\s+(\\d+\\.\\d+)\\s+(\\d+\\.\\d+)\\s+(\\d+)\\s+(\\S+)");
        List<String> labels = List.of("no probes", "10 unhit probes", "50 unhit probes", "p 3 slab functions (3 fetchargs, a string)",
                "r 3 slab functions ret=$retval");
        List<Matcher> rows = r.out().lines().map(row::matcher).filter(Matcher::matches).toList();
        assertEquals(labels, rows.stream().map(m -> m.group(1)).toList(), r.out());
        assertEquals(List.of("0", "10", "50", "3", "3"), rows.stream().map(m -> m.group(2)).toList(), r.out());
        assertEquals("1.000", rows.getFirst().group(5), "the baseline's ratio to itself");
        assertEquals("0", rows.get(1).group(6), "unhit probes: no events");
        assertEquals("0", rows.get(2).group(6), "unhit probes: no events");
        long hot = Long.parseLong(rows.get(3).group(6)), ret = Long.parseLong(rows.get(4).group(6));
        assertTrue(hot > 10_000, "the slab functions are hot in the boot: " + hot);
        assertEquals(hot, ret, "every call returns: as many kretprobe events as kprobe events");
        // a number either way: CPU-time noise can make the per-event figure negative on a loaded machine
        assertTrue(rows.get(3).group(7).matches("-?\\d+\\.\\d+") && rows.get(4).group(7).matches("-?\\d+\\.\\d+"), r.out());
        assertTrue(r.out().lines().anyMatch(l -> l.matches("arm64\\s+registration of 50 probes: \\d+\\.\\d+ s CPU")), r.out());
    }
}
