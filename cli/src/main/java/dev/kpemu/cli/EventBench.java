package dev.kpemu.cli;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.Writer;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;

/**
 * {@code kpemu bench events} (issue 30): the cost of an event on the job of {@link JobBench} (same
 * kernel, initramfs and definitions), resolved by pairs that differ in nothing but the probes. Two
 * child JVMs, started with the options the launcher gives {@code kpemu boot}, run kpemu's own
 * {@code boot} command again and again in-process, every run from the snapshot the plain child
 * saved at {@code run_init_process} ({@code --snapshot-file}): one the plain run, the other the
 * probed run with the definitions registered there and the trace written to a file, each at
 * {@code ROUNDS} rounds and at 0 rounds. The two take turns ({@link TakingTurns}),
 * started together at each pair: they see the same machine at the same moments, and the host's
 * drift, tens of percent within minutes on a shared machine, cancels in their difference. Each
 * run's CPU time is its process's (every thread: JIT and GC included, {@code clock_gettime}) over
 * that run. So a pair carries neither the JVM's start nor the boot. The marginal cost
 * of a pair, {@code ((probed - probed0) - (plain - plain0)) / (events - events0)}, leaves out what
 * does not grow with the rounds (reading the kernel's symbols, registering 294 probes, the trace's
 * header). The guest's instruction counts are checked the same across every plain run and across
 * every probed run (the runs are deterministic); they are printed, plain against probed, which
 * differ by a few hundredths of a percent: the stop at the registration point adds a slice
 * boundary, which moves where a pending interrupt is taken (docs/reference.md).
 */
final class EventBench {
    /** One run of the child: its rounds, whether it was probed, process CPU and wall nanoseconds, guest instructions, trace events. */
    record Run(long rounds, boolean probed, long cpuNanos, long wallNanos, long instructions, long events) {}

    /** One pair: the plain and probed runs at the job's rounds and at 0 rounds. */
    record Pair(Run plain0, Run probed0, Run plain, Run probed) {
        /** CPU microseconds per event, fixed costs included: {@code (probed - plain) / events} ({@link JobFigures.Pair}). */
        double cpuMicrosPerEvent() { return job().cpuMicrosPerEvent(); }

        /** The marginal CPU microseconds per event over the pair at 0 rounds ({@link JobFigures#marginalCpuMicrosPerEvent}). */
        double marginalCpuMicrosPerEvent() { return JobFigures.marginalCpuMicrosPerEvent(job(), empty()); }

        /** The pair at the job's rounds in {@code bench job}'s terms (no peak memory: one JVM ran every run). */
        JobFigures.Pair job() { return new JobFigures.Pair(sample(plain), sample(probed), probed.events()); }

        /** The pair at 0 rounds, likewise. */
        JobFigures.Pair empty() { return new JobFigures.Pair(sample(plain0), sample(probed0), probed0.events()); }

        private static GuestBench.Sample sample(Run r) { return new GuestBench.Sample(r.wallNanos(), r.cpuNanos(), 0); }
    }

    record Result(Arch arch, String release, long rounds, List<Pair> pairs) {
        JobFigures.Spread perEvent() { return spread(Pair::cpuMicrosPerEvent); }
        JobFigures.Spread marginal() { return spread(Pair::marginalCpuMicrosPerEvent); }
        JobFigures.Spread plainCpu() { return spread(p -> p.plain().cpuNanos() / 1e9); }
        JobFigures.Spread probedCpu() { return spread(p -> p.probed().cpuNanos() / 1e9); }

        /**
         * The marginal cost from each kind of run's median over the pairs rather than each pair's:
         * {@code ((med probed - med probed0) - (med plain - med plain0)) / (events - events0)}
         * (CPU µs; NaN without added events). A slow spell that hits one run of a pair moves
         * that pair's figure by all of it and a median of runs by little.
         */
        double marginalOfMedians() {
            if (pairs.isEmpty()) return Double.NaN;
            long events = pairs.get(0).probed().events() - pairs.get(0).probed0().events();
            if (events <= 0) return Double.NaN;
            double added = (medianCpu(Pair::probed) - medianCpu(Pair::probed0)) - (medianCpu(Pair::plain) - medianCpu(Pair::plain0));
            return added / 1e3 / events;
        }

        private double medianCpu(java.util.function.Function<Pair, Run> run) {
            return spread(p -> run.apply(p).cpuNanos()).median();
        }

        private JobFigures.Spread spread(java.util.function.ToDoubleFunction<Pair> figure) {
            return JobFigures.Spread.of(pairs.stream().mapToDouble(figure).toArray());
        }
    }

    static final long ROUNDS = 100;
    static final int PAIRS = 20;
    private static final String RUN = "KPEMU-EVENT-RUN ";
    private static final Pattern INSTRUCTIONS = Pattern.compile("guest powered off \\(exit 0\\); guest [0-9.]+ s, (\\d+) instructions");

    private EventBench() {}

    /**
     * Prepares the job's files ({@link JobBench#prepare}), runs the two children side by side
     * ({@link TakingTurns}) and gathers their pairs: the plain child first alone (it saves the
     * snapshots and warms up), then the probed one (its warm-up), then each pair's four runs with
     * the two children taking turns, both started together at each pair.
     */
    static Result run(Arch arch, long rounds, int pairs, PrintStream progress) throws KernelImageException, IOException {
        JobBench.Setup setup = JobBench.prepare(arch, progress);
        progress.printf("kpemu bench events: %s: %d pair(s) of %d rounds, a plain and a probed JVM taking turns of %d ms,"
                + " every run from a snapshot at run_init_process%n", arch.linuxName(), pairs, rounds, TakingTurns.TURN_MILLIS);
        progress.flush();
        TakingTurns turns = new TakingTurns();
        java.util.concurrent.BlockingQueue<String[]> lines = new java.util.concurrent.LinkedBlockingQueue<>();
        List<Process> children = new ArrayList<>();
        boolean[] busy = new boolean[2];
        List<Run> runs = new ArrayList<>();
        try {
            for (boolean probed : new boolean[] {false, true}) {
                List<String> cmd = GuestBench.java(LauncherBootOptions.forChildren(), EventBench.class);
                cmd.addAll(List.of(arch.linuxName(), setup.initramfs().toString(), setup.events().toString(), setup.dir().toString(),
                        Long.toString(rounds), Integer.toString(pairs), probed ? "probed" : "plain"));
                Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
                int index = children.size();
                children.add(p);
                turns.add(p);
                Thread reader = new Thread(() -> forward(p, index, lines), "kpemu-event-bench-" + index);
                reader.setDaemon(true);
                reader.start();
                busy[index] = true;     // until its first READY: snapshots (plain) and the warm-up
                awaitReady(turns, lines, busy, runs, progress);
            }
            for (int i = 0; i < pairs; i++) {
                for (int c = 0; c < children.size(); c++) {
                    busy[c] = true;
                    java.io.OutputStream in = children.get(c).getOutputStream();
                    in.write('\n');
                    in.flush();
                }
                awaitReady(turns, lines, busy, runs, progress);
            }
            turns.release();
            for (Process p : children) {
                int code = p.waitFor();
                if (code != 0) throw new IOException("the event bench's JVM (" + arch.linuxName() + ") ended with exit " + code);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted");
        } finally {
            turns.release();
            for (Process p : children) if (p.isAlive()) p.destroyForcibly();
        }
        if (runs.size() != 4 * pairs) throw new IOException("the event bench's JVMs reported " + runs.size() + " runs, not " + 4 * pairs);
        return new Result(arch, setup.release(), rounds, pairs(runs));
    }

    private static final String READY = "KPEMU-EVENT-READY";

    /** Child {@code index}'s output lines to {@code lines} ({index, line}); its end as {index, null}. */
    private static void forward(Process p, int index, java.util.concurrent.BlockingQueue<String[]> lines) {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            for (String l = r.readLine(); l != null; l = r.readLine()) lines.add(new String[] {Integer.toString(index), l});
        } catch (IOException e) {
            lines.add(new String[] {Integer.toString(index), "kpemu: bench events: reading child " + index + ": " + e.getMessage()});
        }
        lines.add(new String[] {Integer.toString(index), null});
    }

    /**
     * Gives turns until no child is busy: a child stops being busy at its {@value #READY} line (it
     * waits for its next pair) or its end. Run lines are kept in {@code runs}, the rest passed on.
     */
    private static void awaitReady(TakingTurns turns, java.util.concurrent.BlockingQueue<String[]> lines, boolean[] busy, List<Run> runs,
            PrintStream progress) throws InterruptedException, IOException {
        while (true) {
            for (String[] l = lines.poll(); l != null; l = lines.poll()) {
                int c = Integer.parseInt(l[0]);
                if (l[1] == null || l[1].equals(READY)) busy[c] = false;
                else if (l[1].startsWith(RUN)) runs.add(parse(l[1].substring(RUN.length())));
                else {
                    progress.println(l[1]);
                    progress.flush();
                }
            }
            boolean any = false;
            for (boolean b : busy) any |= b;
            if (!any) return;
            turns.run(c -> busy[c]);
        }
    }

    /** The pairs of the child's runs, four to a pair in any order. */
    static List<Pair> pairs(List<Run> runs) {
        List<Pair> out = new ArrayList<>();
        for (int i = 0; i + 4 <= runs.size(); i += 4) {
            Run plain0 = null, probed0 = null, plain = null, probed = null;
            for (Run r : runs.subList(i, i + 4)) {
                if (r.rounds() == 0) {
                    if (r.probed()) probed0 = r;
                    else plain0 = r;
                } else if (r.probed()) probed = r;
                else plain = r;
            }
            if (plain0 == null || probed0 == null || plain == null || probed == null) throw new IllegalArgumentException("an incomplete pair: " + runs.subList(i, i + 4));
            out.add(new Pair(plain0, probed0, plain, probed));
        }
        return out;
    }

    static String format(Run r) {
        return r.rounds() + " " + (r.probed() ? "probed" : "plain") + " " + r.cpuNanos() + " " + r.wallNanos() + " " + r.instructions() + " " + r.events();
    }

    static Run parse(String line) {
        String[] f = line.trim().split(" ");
        if (f.length != 6) throw new IllegalArgumentException("not a run: " + line);
        return new Run(Long.parseLong(f[0]), f[1].equals("probed"), Long.parseLong(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4]), Long.parseLong(f[5]));
    }

    /**
     * A child: {@code ARCH INITRAMFS EVENTS DIR ROUNDS PAIRS plain|probed}. The plain one first saves
     * a snapshot for each of 0 and ROUNDS rounds; each warms up with a run of its kind at ROUNDS,
     * then, for each pair, prints {@value #READY}, waits for a line on standard input and runs its
     * kind at 0 and at ROUNDS rounds, each run on standard output ({@value #RUN}...), progress on
     * standard error.
     */
    public static void main(String[] args) {
        try {
            child(args);
        } catch (IOException | RuntimeException e) {
            System.err.println("kpemu: bench events: " + e.getMessage());
            System.exit(ExitCodes.ERROR);
        }
        System.exit(ExitCodes.OK);
    }

    private static void child(String[] args) throws IOException {
        Arch arch = Arch.parse(args[0]);
        Path initramfs = Path.of(args[1]), events = Path.of(args[2]), dir = Path.of(args[3]);
        long rounds = Long.parseLong(args[4]);
        int pairs = Integer.parseInt(args[5]);
        boolean probed = args[6].equals("probed");
        String kind = probed ? "probed" : "plain";
        PrintStream err = System.err;
        long[] roundsOf = {0, rounds};
        if (!probed) {
            for (long r : roundsOf) {
                Files.deleteIfExists(snapshot(dir, r));
                Run saved = run(arch, initramfs, events, dir, r, false);
                err.printf("kpemu bench events: %s: snapshot saved by a cold boot of %d rounds (%.2f CPU s, not counted)%n", arch.linuxName(), r, saved.cpuNanos() / 1e9);
            }
        }
        Run warm = run(arch, initramfs, events, dir, rounds, probed);
        err.printf("kpemu bench events: %s: warm-up, %s, %d rounds: %.2f CPU s, %d events (not counted)%n", arch.linuxName(), kind, rounds,
                warm.cpuNanos() / 1e9, warm.events());
        long[] instructions = new long[2];        // at 0 rounds and at ROUNDS: every such run must match the first
        BufferedReader go = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        for (int i = 0; i < pairs; i++) {
            System.out.println(READY);
            System.out.flush();
            if (go.readLine() == null) throw new IOException("the bench ended before pair " + (i + 1));
            for (int k = 0; k < roundsOf.length; k++) {
                long r = roundsOf[k];
                Run run = run(arch, initramfs, events, dir, r, probed);
                if (instructions[k] == 0) instructions[k] = run.instructions();
                else if (instructions[k] != run.instructions())
                    throw new IOException("the guest ran " + run.instructions() + " instructions, an earlier same run " + instructions[k] + ": not deterministic");
                err.printf("kpemu bench events: %s pair %d of %d: %s, %d rounds: %.3f CPU s, %d instructions, %d events%n", arch.linuxName(), i + 1, pairs,
                        kind, r, run.cpuNanos() / 1e9, run.instructions(), run.events());
                System.out.println(RUN + format(run));
                System.out.flush();
            }
        }
    }

    /** Linux's {@code CLOCK_PROCESS_CPUTIME_ID}. */
    private static final int CLOCK_PROCESS_CPUTIME_ID = 2;
    private static final MethodHandle CLOCK_GETTIME = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("clock_gettime").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS));

    /**
     * CPU nanoseconds of this process, every thread, from {@code clock_gettime}: the JMX bean's
     * figure comes in clock ticks (10 ms here), as coarse as the difference of a pair at 0 rounds.
     */
    static long processCpuNanos() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ts = arena.allocate(16, 8);
            int rc = (int) CLOCK_GETTIME.invokeExact(CLOCK_PROCESS_CPUTIME_ID, ts);
            if (rc != 0) throw new IllegalStateException("clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
            return ts.get(ValueLayout.JAVA_LONG, 0) * 1_000_000_000L + ts.get(ValueLayout.JAVA_LONG, 8);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private static Path snapshot(Path dir, long rounds) {
        return dir.resolve("event-bench-" + rounds + ".snapshot");
    }

    /** One {@code kpemu boot} in this JVM; its process CPU and wall time, instructions and events. */
    private static Run run(Arch arch, Path initramfs, Path events, Path dir, long rounds, boolean probed) throws IOException {
        String kind = probed ? "probed" : "plain";
        Path trace = dir.resolve("event-bench-" + kind + ".trace");
        Files.deleteIfExists(trace);
        List<String> args = new ArrayList<>(List.of("boot", "--arch", arch.linuxName(), "--initrd", initramfs.toString(),
                "--append", JobBench.commandLine(arch, rounds), "--memory", Integer.toString(GuestBench.MEMORY_MIB), "--timeout", "3600",
                "--console", dir.resolve("event-bench-" + kind + ".console").toString(), "--snapshot-file", snapshot(dir, rounds).toString()));
        if (probed) args.addAll(List.of("--events-file", events.toString(), "-o", trace.toString()));
        picocli.CommandLine cl = Main.commandLine(BootCommand.class);
        StringWriter messages = new StringWriter();
        cl.setOut(new PrintWriter(Writer.nullWriter()));
        cl.setErr(new PrintWriter(messages, true));
        long cpu0 = processCpuNanos(), wall0 = System.nanoTime();
        int code = cl.execute(args.toArray(String[]::new));
        long cpu = processCpuNanos() - cpu0, wall = System.nanoTime() - wall0;
        if (code != ExitCodes.OK) throw new IOException("kpemu boot ended with exit " + code + ": " + messages.toString().strip());
        Matcher m = INSTRUCTIONS.matcher(messages.toString());
        if (!m.find()) throw new IOException("kpemu boot did not report its instructions: " + messages.toString().strip());
        long n = probed ? JobBench.traceLines(trace) : 0;
        if (probed && n == 0 && rounds > 0) throw new IOException("the probed run traced no event");
        return new Run(rounds, probed, cpu, wall, Long.parseLong(m.group(1)), n);
    }
}
