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
        CliTest.Run r = CliTest.run("bench", "boot", "--arch", "arm64", "--cold", "10,50", "--events", "20000", "--repeat", "1");
        assertEquals(ExitCodes.OK, r.code(), r.out() + r.err());
        assertTrue(r.err().contains("kpemu: bench boot arm64 survey: "), r.err());
        Pattern row = Pattern.compile("arm64\\s+(.+?)\\s+(\\d+)\\s+(\\d+)\\s+(\\d+\\.\\d+)\\s+(\\d+\\.\\d+)\\s+(\\d+)\\s+(\\S+)(.*)");
        List<String> labels = List.of("no probes", "10 unhit probes", "50 unhit probes", "p 3 slab functions (3 fetchargs, a string)",
                "r 3 slab functions ret=$retval", "getppid x20000, no probes", "getppid x20000, p __task_pid_nr_ns (3 fetchargs, a string)",
                "getppid x20000, r __task_pid_nr_ns ret=$retval");
        List<Matcher> rows = r.out().lines().map(row::matcher).filter(Matcher::matches).toList();
        assertEquals(labels, rows.stream().map(m -> m.group(1)).toList(), r.out());
        assertEquals(List.of("0", "10", "50", "3", "3", "0", "1", "1"), rows.stream().map(m -> m.group(2)).toList(), r.out());
        assertEquals("1.000", rows.getFirst().group(5), "the baseline's ratio to itself");
        assertEquals("0", rows.get(1).group(6), "unhit probes: no events");
        assertEquals("0", rows.get(2).group(6), "unhit probes: no events");
        long hot = Long.parseLong(rows.get(3).group(6)), ret = Long.parseLong(rows.get(4).group(6));
        assertTrue(hot > 10_000, "the slab functions are hot in the boot: " + hot);
        assertEquals(hot, ret, "every call returns: as many kretprobe events as kprobe events");
        assertEquals("1.000", rows.get(5).group(5), "the workload's baseline's ratio to itself");
        long wl = Long.parseLong(rows.get(6).group(6)), wlRet = Long.parseLong(rows.get(7).group(6));
        assertTrue(wl >= 20_000 && wl < 21_000, "every getppid() is an event (and a few calls of the boot): " + wl);
        assertEquals(wl, wlRet, "every call returns: as many kretprobe events as kprobe events");
        for (int i = 5; i < 8; i++) assertEquals("", rows.get(i).group(8), "the workload completed: " + r.out());
        // a number either way: CPU-time noise can make the per-event figure negative on a loaded machine
        for (int i : new int[] {3, 4, 6, 7}) assertTrue(rows.get(i).group(7).matches("-?\\d+\\.\\d+"), r.out());
        assertTrue(r.out().lines().anyMatch(l -> l.matches("arm64\\s+registration of 50 probes: \\d+\\.\\d+ s CPU")), r.out());
    }
}
