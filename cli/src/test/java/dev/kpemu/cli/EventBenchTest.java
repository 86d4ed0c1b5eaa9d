package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@code kpemu bench events}: the pairs' arithmetic, the process CPU clock it reads (its bad options:
 * {@link BenchJobTest}), and a short run on x86-64 (a real kernel, kpemu boot in a plain and a probed JVM from
 * snapshots). Not timed: only the structure and the guest's instruction counts are checked.
 */
class EventBenchTest {
    private static EventBench.Run run(long rounds, boolean probed, long cpuMillis, long events) {
        return new EventBench.Run(rounds, probed, cpuMillis * 1_000_000, cpuMillis * 2_000_000, 1000 + rounds, events);
    }

    @Test
    void pairsTakeTheirFourRunsInAnyOrderAndSubtractTheZeroRoundPair() {
        List<EventBench.Run> runs = List.of(
                run(0, false, 250, 0), run(0, true, 300, 1000), run(100, false, 1250, 0), run(100, true, 1500, 51000),
                run(0, true, 310, 1000), run(0, false, 240, 0), run(100, true, 1440, 51000), run(100, false, 1240, 0));
        List<EventBench.Pair> pairs = EventBench.pairs(runs);
        assertEquals(2, pairs.size());
        // (1500 - 1250) ms over 51,000 events; marginal ((1500 - 300) - (1250 - 250)) ms over 50,000 events
        assertEquals(250e3 / 51000, pairs.get(0).cpuMicrosPerEvent(), 1e-9);
        assertEquals(200e3 / 50000, pairs.get(0).marginalCpuMicrosPerEvent(), 1e-9);
        // the second pair came probed first: ((1440 - 310) - (1240 - 240)) ms over 50,000 events
        assertEquals(130e3 / 50000, pairs.get(1).marginalCpuMicrosPerEvent(), 1e-9);
        assertThrows(IllegalArgumentException.class, () -> EventBench.pairs(List.of(runs.get(0), runs.get(0), runs.get(2), runs.get(3))));
        // each kind's median over the two pairs: plain0 245, probed0 305, plain 1245, probed 1470 ms;
        // ((1470 - 305) - (1245 - 245)) ms over 50,000 events
        EventBench.Result result = new EventBench.Result(dev.kpemu.machine.Arch.X86_64, "6.1", 100, pairs);
        assertEquals(165e3 / 50000, result.marginalOfMedians(), 1e-9);
    }

    @Test
    void aRunLineReadsBackAsWritten() {
        EventBench.Run r = new EventBench.Run(500, true, 6_123_456_789L, 7_000_000_001L, 3_309_524_173L, 190_586);
        assertEquals(r, EventBench.parse(EventBench.format(r)));
        assertThrows(IllegalArgumentException.class, () -> EventBench.parse("500 probed 1 2 3"));
    }

    @Test
    void theProcessClockCountsThisThreadsWorkInNanoseconds() {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long p0 = EventBench.processCpuNanos(), t0 = threads.getCurrentThreadCpuTime();
        long x = 0;
        while (threads.getCurrentThreadCpuTime() - t0 < 50_000_000) x = x * 31 + 7;
        long thread = threads.getCurrentThreadCpuTime() - t0, process = EventBench.processCpuNanos() - p0;
        assertTrue(x != 0);
        assertTrue(process >= thread - 1_000_000, "the process's CPU " + process + " ns holds this thread's " + thread + " ns");
    }

    @Test
    @Tag("kernel")
    @Tag("scale")
    void pairsRunTheSameGuestInTwoJvmsTakingTurns() {
        CliTest.Run r = CliTest.run("bench", "events", "--arch", "x86_64", "--rounds", "3", "--repeat", "1");
        assertEquals(ExitCodes.OK, r.code(), r.out() + r.err());
        Matcher row = Pattern.compile("x86_64\\s+3\\s+1 \\| .* \\|\\s+(\\d+) \\| ").matcher(r.out());
        assertTrue(row.find(), r.out());
        assertTrue(Long.parseLong(row.group(1)) > 0, "the probed run traced the job: " + r.out());
        assertTrue(r.out().contains("x86_64  marginal CPU us per event from each kind of run's median over the pairs: "), r.out());
        Matcher counts = Pattern.compile("guest instructions, plain / probed: (\\d+) / (\\d+) at 3 rounds, (\\d+) / (\\d+) at 0 rounds").matcher(r.out());
        assertTrue(counts.find(), r.out());
        assertTrue(Long.parseLong(counts.group(1)) > Long.parseLong(counts.group(3)), "3 rounds run more than 0: " + r.out());
        assertTrue(r.err().contains("kpemu bench events: x86_64: snapshot saved by a cold boot of 3 rounds"), r.err());
        assertTrue(r.err().contains("kpemu bench events: x86_64 pair 1 of 1: probed, 3 rounds: "), r.err());
    }
}
