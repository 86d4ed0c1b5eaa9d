package dev.kpemu.cli;

import java.util.Arrays;
import java.util.List;

/**
 * The arithmetic of {@code kpemu bench job}: one machine's pairs of runs (plain, probed and the
 * probed run's events, a pair per round), their medians, the ratios kpemu / QEMU, and the cost of
 * an event per pair, {@code (probed - plain) / events}, with its median and spread across pairs
 * (a spread as wide as the median says the subtraction is not resolved).
 */
final class JobFigures {
    /** One round of one machine: the plain run, the probed run and the events the probed run traced. */
    record Pair(GuestBench.Sample plain, GuestBench.Sample probed, long events) {
        /** CPU microseconds per event of this pair; NaN without events. */
        double cpuMicrosPerEvent() { return events <= 0 ? Double.NaN : (probed.cpuNanos() - plain.cpuNanos()) / 1e3 / events; }

        /** Wall microseconds per event of this pair; NaN without events. */
        double wallMicrosPerEvent() { return events <= 0 ? Double.NaN : (probed.wallNanos() - plain.wallNanos()) / 1e3 / events; }
    }

    /** A median with the least and the greatest of its values. */
    record Spread(double median, double min, double max) {
        static Spread of(double[] v) {
            if (v.length == 0) return new Spread(Double.NaN, Double.NaN, Double.NaN);
            double[] s = v.clone();
            Arrays.sort(s);
            double m = s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
            return new Spread(m, s[0], s[s.length - 1]);
        }
    }

    /** One machine's figures over its pairs. */
    record Machine(List<Pair> pairs) {
        Machine {
            if (pairs.isEmpty()) throw new IllegalArgumentException("no pairs");
            pairs = List.copyOf(pairs);
        }

        long plainWall() { return GuestBench.median(pairs.stream().mapToLong(p -> p.plain().wallNanos()).toArray()); }
        long probedWall() { return GuestBench.median(pairs.stream().mapToLong(p -> p.probed().wallNanos()).toArray()); }
        long plainCpu() { return GuestBench.median(pairs.stream().mapToLong(p -> p.plain().cpuNanos()).toArray()); }
        long probedCpu() { return GuestBench.median(pairs.stream().mapToLong(p -> p.probed().cpuNanos()).toArray()); }
        long plainPeakKib() { return GuestBench.median(pairs.stream().mapToLong(p -> p.plain().peakKib()).toArray()); }
        long probedPeakKib() { return GuestBench.median(pairs.stream().mapToLong(p -> p.probed().peakKib()).toArray()); }
        long events() { return GuestBench.median(pairs.stream().mapToLong(Pair::events).toArray()); }
        Spread cpuMicrosPerEvent() { return Spread.of(pairs.stream().mapToDouble(Pair::cpuMicrosPerEvent).filter(d -> !Double.isNaN(d)).toArray()); }
        Spread wallMicrosPerEvent() { return Spread.of(pairs.stream().mapToDouble(Pair::wallMicrosPerEvent).filter(d -> !Double.isNaN(d)).toArray()); }
    }

    private JobFigures() {}

    /** kpemu / QEMU; NaN when QEMU's figure is not above 0. */
    static double ratio(long kpemu, long qemu) {
        return qemu <= 0 ? Double.NaN : (double) kpemu / qemu;
    }
}
