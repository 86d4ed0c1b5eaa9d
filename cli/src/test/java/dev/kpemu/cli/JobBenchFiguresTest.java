package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

/** The arithmetic of {@code kpemu bench job} ({@link JobFigures}): medians, ratios, per-event cost and its spread. */
class JobBenchFiguresTest {
    private static GuestBench.Sample s(double wallS, double cpuS, long kib) {
        return new GuestBench.Sample(Math.round(wallS * 1e9), Math.round(cpuS * 1e9), kib);
    }

    @Test
    void perEventCostIsProbedMinusPlainOverEventsPerPair() {
        JobFigures.Pair p = new JobFigures.Pair(s(10, 9, 1000), s(11, 9.5, 1200), 100_000);
        assertEquals(5.0, p.cpuMicrosPerEvent(), 1e-9, "0.5 s over 100,000 events");
        assertEquals(10.0, p.wallMicrosPerEvent(), 1e-9, "1 s over 100,000 events");
        assertTrue(Double.isNaN(new JobFigures.Pair(s(1, 1, 1), s(2, 2, 1), 0).cpuMicrosPerEvent()), "no events: no cost");
    }

    @Test
    void mediansAndSpreadAcrossPairs() {
        JobFigures.Machine m = new JobFigures.Machine(List.of(
                new JobFigures.Pair(s(10, 9, 100), s(12, 10, 300), 1_000_000),   // 1 us CPU per event
                new JobFigures.Pair(s(11, 10, 200), s(13, 13, 400), 1_000_000),  // 3 us
                new JobFigures.Pair(s(12, 11, 300), s(14, 13, 500), 2_000_000)), List.of()); // 1 us
        assertEquals(11_000_000_000L, m.plainWall());
        assertEquals(13_000_000_000L, m.probedWall());
        assertEquals(10_000_000_000L, m.plainCpu());
        assertEquals(13_000_000_000L, m.probedCpu());
        assertEquals(200, m.plainPeakKib());
        assertEquals(400, m.probedPeakKib());
        assertEquals(1_000_000, m.events());
        JobFigures.Spread c = m.cpuMicrosPerEvent();
        assertEquals(1.0, c.median(), 1e-9);
        assertEquals(1.0, c.min(), 1e-9);
        assertEquals(3.0, c.max(), 1e-9);
        assertEquals(2.0, m.wallMicrosPerEvent().median(), 1e-9, "2 s, 2 s, 2 s over 1, 1, 2 million: 2, 2, 1 us");
    }

    @Test
    void marginalCostLeavesTheFixedCostsOut() {
        JobFigures.Pair empty = new JobFigures.Pair(s(3, 2, 100), s(5, 3.5, 150), 1_000);      // registration: +1.5 s CPU, +2 s wall
        JobFigures.Pair job = new JobFigures.Pair(s(10, 8, 100), s(13, 11.5, 150), 1_001_000); // +3.5 s CPU, +3 s wall
        assertEquals(2.0, JobFigures.marginalCpuMicrosPerEvent(job, empty), 1e-9, "(3.5 - 1.5) s over a million added events");
        assertEquals(1.0, JobFigures.marginalWallMicrosPerEvent(job, empty), 1e-9, "(3 - 2) s over a million");
        assertEquals(3.5, job.cpuMicrosPerEvent(), 0.01, "fixed costs included");
        assertTrue(Double.isNaN(JobFigures.marginalCpuMicrosPerEvent(empty, empty)), "no added events");
        JobFigures.Machine m = new JobFigures.Machine(List.of(job, job), List.of(empty, empty));
        assertEquals(2.0, m.marginalCpuMicrosPerEvent().median(), 1e-9);
        assertEquals(1_000, m.atZeroRounds().events());
        assertEquals(null, new JobFigures.Machine(List.of(job), List.of()).atZeroRounds());
        assertThrows(IllegalArgumentException.class, () -> new JobFigures.Machine(List.of(job), List.of(empty, empty)), "a pair at 0 rounds per pair");
    }

    @Test
    void evenCountMedianIsTheMeanOfTheMiddleTwo() {
        JobFigures.Spread s = JobFigures.Spread.of(new double[] {4, 1, 3, 2});
        assertEquals(2.5, s.median(), 1e-9);
        assertEquals(1, s.min(), 1e-9);
        assertEquals(4, s.max(), 1e-9);
        assertTrue(Double.isNaN(JobFigures.Spread.of(new double[0]).median()));
    }

    @Test
    void medianIntervalIsTheOrderStatisticsOfTheBinomialTables() {
        // the ranks of the distribution-free 95 % interval of a median, as statistics tables give them:
        // n = 6 (x1, x6), 10 (x2, x9), 15 (x4, x12), 20 (x6, x15), 30 (x10, x21); below 6 none reaches 95 %
        assertEquals(0, JobFigures.medianIntervalRank(5));
        assertEquals(1, JobFigures.medianIntervalRank(6));
        assertEquals(2, JobFigures.medianIntervalRank(10));
        assertEquals(4, JobFigures.medianIntervalRank(15));
        assertEquals(6, JobFigures.medianIntervalRank(20));
        assertEquals(10, JobFigures.medianIntervalRank(30));
        double[] v = new double[10];
        for (int i = 0; i < v.length; i++) v[i] = 10 - i;       // 10, 9, ..., 1
        JobFigures.Spread s = JobFigures.Spread.of(v);
        assertTrue(s.hasInterval());
        assertEquals(2, s.ciLow(), 1e-9);
        assertEquals(9, s.ciHigh(), 1e-9);
        assertEquals(5.5, s.median(), 1e-9);
        assertTrue(!JobFigures.Spread.of(new double[] {1, 2, 3, 4, 5}).hasInterval());
    }

    @Test
    void ratioIsKpemuOverQemuAndUndefinedWithoutQemu() {
        assertEquals(1.5, JobFigures.ratio(3, 2), 1e-9);
        assertTrue(Double.isNaN(JobFigures.ratio(3, 0)));
        assertThrows(IllegalArgumentException.class, () -> new JobFigures.Machine(List.of(), List.of()));
    }
}
