package dev.kpemu.cli;

import java.util.Arrays;
import java.util.List;

/**
 * The arithmetic of {@code kpemu bench job}: one machine's pairs of runs (plain, probed and the
 * probed run's events, a pair per round), their medians, the ratios kpemu / QEMU, and the cost of
 * an event per pair, {@code (probed - plain) / events}, with its median and spread across pairs
 * (a spread as wide as the median says the subtraction is not resolved). With each pair a pair of
 * the same runs at 0 rounds (boot, registration, the init's own steps, power-off), the marginal
 * cost of an event: what the job's rounds added to the probed run beyond what they added to the
 * plain one, over the events they added — the fixed costs (kpemu reading the kernel's symbols and
 * registering, Linux's 294 writes to kprobe_events and its reading of the trace's header) left out.
 */
final class JobFigures {
    /** One round of one machine: the plain run, the probed run and the events the probed run traced. */
    record Pair(GuestBench.Sample plain, GuestBench.Sample probed, long events) {
        /** CPU microseconds per event of this pair; NaN without events. */
        double cpuMicrosPerEvent() { return events <= 0 ? Double.NaN : (probed.cpuNanos() - plain.cpuNanos()) / 1e3 / events; }

        /** Wall microseconds per event of this pair; NaN without events. */
        double wallMicrosPerEvent() { return events <= 0 ? Double.NaN : (probed.wallNanos() - plain.wallNanos()) / 1e3 / events; }
    }

    /**
     * The marginal CPU microseconds per event of a pair over its pair at 0 rounds:
     * {@code ((probed - probed0) - (plain - plain0)) / (events - events0)}; NaN without added events.
     */
    static double marginalCpuMicrosPerEvent(Pair job, Pair empty) {
        long events = job.events() - empty.events();
        if (events <= 0) return Double.NaN;
        long added = (job.probed().cpuNanos() - empty.probed().cpuNanos()) - (job.plain().cpuNanos() - empty.plain().cpuNanos());
        return added / 1e3 / events;
    }

    /** As {@link #marginalCpuMicrosPerEvent} with wall time. */
    static double marginalWallMicrosPerEvent(Pair job, Pair empty) {
        long events = job.events() - empty.events();
        if (events <= 0) return Double.NaN;
        long added = (job.probed().wallNanos() - empty.probed().wallNanos()) - (job.plain().wallNanos() - empty.plain().wallNanos());
        return added / 1e3 / events;
    }

    /**
     * A median with the least and the greatest of its values and, from 6 values on, a 95 %
     * confidence interval of the median that assumes nothing of the values' distribution: the
     * order statistics {@code [x(j), x(n + 1 - j)]}, {@code j} the greatest rank with
     * {@code P(B <= j - 1) <= 0.025} for {@code B ~ Binomial(n, 1/2)} (its coverage is at least 95 %).
     * With fewer values no interval reaches 95 % (5 values: the least and greatest cover 93.75 %): NaN.
     */
    record Spread(double median, double min, double max, double ciLow, double ciHigh) {
        static Spread of(double[] v) {
            if (v.length == 0) return new Spread(Double.NaN, Double.NaN, Double.NaN, Double.NaN, Double.NaN);
            double[] s = v.clone();
            Arrays.sort(s);
            int n = s.length;
            double m = n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
            int j = medianIntervalRank(n);
            return j < 1 ? new Spread(m, s[0], s[n - 1], Double.NaN, Double.NaN) : new Spread(m, s[0], s[n - 1], s[j - 1], s[n - j]);
        }

        /** Whether the 95 % interval of the median is known (6 values or more). */
        boolean hasInterval() { return !Double.isNaN(ciLow); }
    }

    /** The rank {@code j} (1-based) of the lower end of the median's 95 % interval over {@code n} values; 0 when none reaches 95 %. */
    static int medianIntervalRank(int n) {
        // P(B <= k) for B ~ Binomial(n, 1/2), summed term by term in doubles (n is a count of benchmark pairs)
        double term = Math.pow(0.5, n), cumulative = 0;
        int j = 0;
        for (int k = 0; k < n; k++) {
            cumulative += term;                    // P(B <= k)
            if (cumulative > 0.025) break;
            j = k + 1;                             // P(B <= j - 1) <= 0.025
            term = term * (n - k) / (k + 1);
        }
        return j;
    }

    /** One machine's figures over its pairs and, round by round, the same pairs at 0 rounds (none: no marginal cost). */
    record Machine(List<Pair> pairs, List<Pair> empty) {
        Machine {
            if (pairs.isEmpty()) throw new IllegalArgumentException("no pairs");
            if (!empty.isEmpty() && empty.size() != pairs.size())
                throw new IllegalArgumentException(pairs.size() + " pairs but " + empty.size() + " pairs at 0 rounds");
            pairs = List.copyOf(pairs);
            empty = List.copyOf(empty);
        }

        /** The figures at 0 rounds, as a machine of their own; null when there are none. */
        Machine atZeroRounds() { return empty.isEmpty() ? null : new Machine(empty, List.of()); }

        Spread marginalCpuMicrosPerEvent() {
            return Spread.of(java.util.stream.IntStream.range(0, empty.size()).mapToDouble(i -> JobFigures.marginalCpuMicrosPerEvent(pairs.get(i), empty.get(i)))
                    .filter(d -> !Double.isNaN(d)).toArray());
        }

        Spread marginalWallMicrosPerEvent() {
            return Spread.of(java.util.stream.IntStream.range(0, empty.size()).mapToDouble(i -> JobFigures.marginalWallMicrosPerEvent(pairs.get(i), empty.get(i)))
                    .filter(d -> !Double.isNaN(d)).toArray());
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
