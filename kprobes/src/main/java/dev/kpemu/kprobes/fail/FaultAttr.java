package dev.kpemu.kprobes.fail;

import java.util.SplittableRandom;

/**
 * One {@code --fail} spec's decision, Linux's {@code should_fail_ex} (lib/fault-inject.c) with
 * {@code size} 1 as fail_function calls it, in Linux's order of checks: probability 0 never
 * fails; the task filter (kpemu: {@code comm=}, {@code pid=}, {@code tree=}, standing for the task's
 * {@code make_it_fail}); {@code times} 0 stops; {@code space} is used up first; every
 * {@code interval}-th call; the probability drawn as {@code get_random_u32_below(100)} from a
 * PRNG seeded per run; the stack filter (kpemu: {@code caller=}); then kpemu's own {@code nth}
 * (the Nth call, from 1, of those that passed everything else); on a failure {@code times}
 * goes down by one unless it is -1.
 *
 * <p>Defaults are Linux's {@code FAULT_ATTR_INITIALIZER} (interval 1, times 1, space 0,
 * verbose 2) except probability, 100 here (a spec that names a function means to fail it).
 * Not thread-safe; one instance per spec per run.
 */
public final class FaultAttr {
    /** The PRNG seed when none is given: fixed, so a run's draws are the same every time. */
    public static final long DEFAULT_SEED = 29;

    /** What {@link #shouldFail} needs to know about the call. */
    public interface Call {
        String comm();

        int pid();

        /**
         * True when the calling task is the task {@code pid} or a descendant of it (its
         * {@code real_parent} chain): the {@code tree=} filter. Default: the task itself only.
         */
        default boolean descendsFrom(int pid) { return pid == pid(); }

        /** True when a frame of the call's stack trace is in {@code symbol}. */
        boolean hasCaller(String symbol);
    }

    private final long probability;
    private final long interval;
    private int times;
    private int space;
    private final int verbose;
    private final String comm;
    private final Integer pid;
    private final Integer tree;
    private final boolean afterExec;
    private boolean execSeen;
    private final String caller;
    private final long nth;
    private final SplittableRandom random;
    private long count;
    private long passed;

    private FaultAttr(Builder b) {
        this.probability = b.probability;
        this.interval = b.interval;
        this.times = b.times;
        this.space = b.space;
        this.verbose = b.verbose;
        this.comm = b.comm;
        this.pid = b.pid;
        this.tree = b.tree;
        this.afterExec = b.afterExec;
        this.caller = b.caller;
        this.nth = b.nth;
        this.random = new SplittableRandom(b.seed);
    }

    public static Builder builder() { return new Builder(); }

    /** Decides one call; on true, the caller overrides the function's return and reports it. */
    public boolean shouldFail(Call call) {
        if (probability == 0) return false;
        if (!taskMatches(call)) return false;
        if (times == 0) return false;
        if (space > 1) {
            space -= 1;
            return false;
        }
        if (interval > 1) {
            count++;
            if (count % interval != 0) return false;
        }
        if (probability <= random.nextInt(100)) return false;
        if (caller != null && !call.hasCaller(caller)) return false;
        if (nth > 0 && ++passed != nth) return false;
        return true;
    }

    /**
     * Linux's {@code fail_dump} text for a failure decided by {@link #shouldFail}, printed before
     * {@link #consumeTime}: empty at verbose 0; verbose 2 adds a stack dump, which the caller prints after it.
     */
    public String dump(String name) {
        if (verbose <= 0) return "";
        return "FAULT_INJECTION: forcing a failure.\nname " + name + ", interval " + interval + ", probability " + probability
                + ", space " + space + ", times " + times + "\n";
    }

    /** After the dump: {@code times} down by one unless it is -1 or already 0. */
    public void consumeTime() {
        if (times != -1 && times != 0) times--;
    }

    public int verbose() { return verbose; }

    /** The {@code tree=} task, or null. */
    public Integer tree() { return tree; }

    /** Whether only calls after the {@code tree=} task's exec count ({@code after=exec}). */
    public boolean afterExec() { return afterExec; }

    /** The {@code tree=} task has exec'd a program: with {@code after=exec}, its tree's calls count from now on. */
    public void execSeen() { execSeen = true; }

    public int times() { return times; }

    private boolean taskMatches(Call call) {
        if (comm != null && !comm.equals(call.comm())) return false;
        if (tree != null && !call.descendsFrom(tree)) return false;
        if (afterExec && !execSeen) return false;
        return pid == null || pid == call.pid();
    }

    /** The attributes of one spec; values are checked as Linux's debugfs files and kpemu's parser take them. */
    public static final class Builder {
        private long probability = 100;
        private long interval = 1;
        private int times = 1;
        private int space = 0;
        private int verbose = 2;
        private String comm;
        private Integer pid;
        private Integer tree;
        private boolean afterExec;
        private String caller;
        private long nth;
        private long seed = DEFAULT_SEED;

        /** Percent, 0–100. */
        public Builder probability(long p) {
            if (p < 0 || p > 100) throw new IllegalArgumentException("probability must be 0..100: " + p);
            probability = p;
            return this;
        }

        public Builder interval(long i) {
            if (i < 0) throw new IllegalArgumentException("interval must not be negative: " + i);
            interval = i;
            return this;
        }

        /** How many failures; -1 unlimited. */
        public Builder times(int t) {
            if (t < -1) throw new IllegalArgumentException("times must be -1 (unlimited) or more: " + t);
            times = t;
            return this;
        }

        public Builder space(int s) { space = s; return this; }

        public Builder verbose(int v) {
            if (v < 0 || v > 2) throw new IllegalArgumentException("verbose must be 0, 1 or 2: " + v);
            verbose = v;
            return this;
        }

        public Builder comm(String c) { comm = c; return this; }

        public Builder pid(int p) { pid = p; return this; }

        /**
         * Only calls by the task {@code pid} and its descendants: kpemu's stand-in for Linux's
         * {@code make-it-fail} set on that task, which its children inherit at fork.
         */
        public Builder tree(int p) { tree = p; return this; }

        /**
         * With {@link #tree}: only the calls after that task execs a program (its first
         * {@code setup_new_exec}; kpemu's {@code after=exec}), so the calls its fork made before are
         * not counted: what {@code kpemu faults} counts as the command's calls.
         */
        public Builder afterExec() { afterExec = true; return this; }

        public Builder caller(String symbol) { caller = symbol; return this; }

        /** Fail only the Nth (from 1) call that passes the other checks. */
        public Builder nth(long n) {
            if (n < 1) throw new IllegalArgumentException("nth counts from 1: " + n);
            nth = n;
            return this;
        }

        public Builder seed(long s) { seed = s; return this; }

        public FaultAttr build() { return new FaultAttr(this); }
    }
}
