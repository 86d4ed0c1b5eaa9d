package dev.kpemu.machine;

/**
 * The order and the quantum lengths in which a machine with several vCPUs runs them on its one
 * host thread (issue 26, docs/smp-notes.md step 2), counted in guest instructions: a function of a
 * seed alone, so a seed names one interleaving and the same seed gives it again, byte for byte
 * (QEMU's single-threaded round-robin TCG with icount is the model).
 *
 * <p>{@link #DEFAULT_SEED} is a fixed round-robin: vCPUs in index order, each for
 * {@link #DEFAULT_QUANTUM} instructions. Any other seed draws, through a SplitMix64 generator
 * seeded with it ({@link Generator}: {@code java.util.SplittableRandom}'s algorithm and sequences,
 * with its one-long state readable for snapshots), at every switch the next vCPU (uniformly among those that can run, the one that
 * just ran included) and its quantum: {@code 1 + r} with {@code r} uniform below {@code 2^b} and
 * {@code b} uniform in 1..14, so quanta of a few instructions (which make races show) are as
 * likely as quanta of thousands. Only integer draws: no floating point, the same on every JVM.
 *
 * <p>A schedule is stateful (its generator advances with every switch); the machine keeps it
 * across {@link Machine#run} calls, so a run in chunks interleaves as one long run does, and a
 * machine snapshot carries its position ({@link #position}, {@link #at}).
 */
public final class Schedule {
    /** The seed of the default schedule: round-robin, {@link #DEFAULT_QUANTUM}. */
    public static final long DEFAULT_SEED = 0;
    /**
     * The default quantum: 100,000 instructions, 100 µs of guest time at the nominal speed. In a
     * booted Linux a switch of engines costs far more than a bare loop's (docs/smp-notes.md, "Where
     * the time of several CPUs goes": some 40 µs of host CPU, the incoming engine's translated code,
     * TLB and block cache gone cold, against ~0.3 µs for a one-block loop), so quanta of 10,000
     * spent a third or more of a 4-CPU run switching; at 100,000 it is a few per cent. A vCPU
     * spinning at a kernel spin-wait ends its quantum early when another can run (host breakpoints
     * calling {@link Machine#yieldQuantum}), so a waiter does not spin the longer quantum out; an
     * IPI's target waits at most (N - 1) quanta, 300 µs with 4 vCPUs, under a Linux tick; QEMU's
     * round-robin TCG kicks a vCPU out after at most 100 ms of host time, far coarser.
     */
    public static final long DEFAULT_QUANTUM = 100_000;
    /** Seeded schedules draw quanta up to 2^14 instructions (16,384), about the default's scale. */
    static final int MAX_QUANTUM_BITS = 14;

    private final long seed;
    private final long quantum;
    private final Generator random;

    private Schedule(long seed, long quantum, Generator random) {
        this.seed = seed;
        this.quantum = quantum;
        this.random = random;
    }

    /** A fixed round-robin with quanta of {@code quantum} instructions (at least 1). */
    public static Schedule roundRobin(long quantum) {
        if (quantum <= 0) throw new IllegalArgumentException("quantum must be positive");
        return new Schedule(DEFAULT_SEED, quantum, null);
    }

    /** The schedule a seed names: {@link #DEFAULT_SEED} the default round-robin, any other a seeded draw. */
    public static Schedule of(long seed) {
        return seed == DEFAULT_SEED ? roundRobin(DEFAULT_QUANTUM) : new Schedule(seed, 0, new Generator(seed));
    }

    /** The same schedule from its start (a machine gets a copy: {@link Machine#setSchedule}). */
    Schedule fresh() {
        return random == null ? new Schedule(seed, quantum, null) : new Schedule(seed, 0, new Generator(seed));
    }

    public long seed() { return seed; }

    /** Where the schedule is in its sequence: the generator's state (the seed before any draw; 0 for a round-robin, which draws nothing). */
    public long position() { return random == null ? 0 : random.state; }

    /**
     * This schedule (same seed, or same round-robin quantum) at {@code position}, as {@link #position}
     * read it: what a restored machine continues with.
     */
    Schedule at(long position) {
        if (random == null) return new Schedule(seed, quantum, null);
        Generator g = new Generator(seed);
        g.state = position;
        return new Schedule(seed, 0, g);
    }

    /** True for a round-robin schedule (fixed order and quantum). */
    public boolean roundRobin() { return random == null; }

    /** The round-robin quantum, or 0 for a seeded schedule. */
    public long quantum() { return quantum; }

    /**
     * The vCPU to run next: {@code runnable[i]} tells which can run, {@code last} is the one that
     * ran last (-1: none yet, a round-robin starts at vCPU 0); -1 when none can.
     */
    int next(boolean[] runnable, int last) {
        int n = runnable.length, count = 0;
        for (boolean r : runnable) if (r) count++;
        if (count == 0) return -1;
        if (random == null) {
            for (int k = 1; k <= n; k++) {
                int i = (last + k) % n;
                if (runnable[i]) return i;
            }
            return -1;
        }
        int pick = random.nextInt(count);
        for (int i = 0; i < n; i++) {
            if (runnable[i] && pick-- == 0) return i;
        }
        throw new AssertionError();
    }

    /** The quantum of the vCPU just chosen. */
    long nextQuantum() {
        if (random == null) return quantum;
        int bits = 1 + random.nextInt(MAX_QUANTUM_BITS);
        return 1 + random.nextLong(1L << bits);
    }

    @Override public String toString() {
        return random == null ? "round-robin, quantum " + quantum : "seed " + seed;
    }

    /**
     * SplitMix64 as {@code java.util.SplittableRandom(seed)} runs it (JDK 17+: the golden gamma, the
     * {@code mix64}/{@code mix32} finalizers, {@code RandomSupport.boundedNextInt/Long}'s rejection
     * loops), so a seed names the interleaving it named with {@code SplittableRandom}
     * ({@code ScheduleGeneratorTest} compares them draw by draw); unlike that class its whole state
     * is one readable long.
     */
    static final class Generator {
        private static final long GOLDEN_GAMMA = 0x9e3779b97f4a7c15L;
        long state;

        Generator(long seed) { this.state = seed; }

        private long nextSeed() { return state += GOLDEN_GAMMA; }

        long nextLong() {
            long z = nextSeed();
            z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
            z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
            return z ^ (z >>> 31);
        }

        int nextInt() {
            long z = nextSeed();
            z = (z ^ (z >>> 33)) * 0x62a9d9ed799705f5L;
            return (int) (((z ^ (z >>> 28)) * 0xcb24d0a5c88c35b3L) >>> 32);
        }

        /** Uniform in [0, bound), bound > 0. */
        int nextInt(int bound) {
            int r = nextInt();
            int m = bound - 1;
            if ((bound & m) == 0) return r & m;
            for (int u = r >>> 1; u + m - (r = u % bound) < 0; u = nextInt() >>> 1) { }
            return r;
        }

        /** Uniform in [0, bound), bound > 0. */
        long nextLong(long bound) {
            long r = nextLong();
            long m = bound - 1;
            if ((bound & m) == 0) return r & m;
            for (long u = r >>> 1; u + m - (r = u % bound) < 0; u = nextLong() >>> 1) { }
            return r;
        }
    }
}
