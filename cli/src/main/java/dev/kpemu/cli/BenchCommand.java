package dev.kpemu.cli;

import java.io.PrintWriter;
import java.util.List;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import dev.kpemu.bench.UnicornBench;
import dev.kpemu.optprobes.bench.OptimizedProbeBench;
import dev.kpemu.machine.Arch;

/** {@code kpemu bench WHAT}: measured costs, as medians over repeated batches, for both arches. */
@Command(name = "bench", mixinStandardHelpOptions = true,
        description = {"Run a benchmark and print medians for both architectures.",
                "  unicorn  cost of an interrupt-hook round trip, a register read, a one-instruction",
                "           step and a stop+restart on the Unicorn binding",
                "  probes   per-hit cost of a stepped, a boosted and an optimized kprobe and a kretprobe with a",
                "           trivial Java handler, against the same loop unprobed (bare-metal guest)",
                "  boot     on Debian's booted kernel: boots with 0/100/1,000/10,000 probes that are never hit",
                "           (ratio to 0), registering 10,000, and the per-event cost of a three-fetcharg kprobe event",
                "           and a kretprobe event on the slab allocator's hot functions (kmem_cache_alloc, ...), with the boot's slowdown;",
                "           then the same two events on a function every getppid() calls, in a guest making a million of them",
                "  snapshot a probe session to power-off started cold and started from a snapshot taken at",
                "           run_init_process (kpemu boot --snapshot): wall and CPU time, the ratio restored / cold",
                "  guest    guest micro-benchmarks (system calls, page faults, context switches, fork+exec, a pipe",
                "           ping-pong, a file-system loop, a busybox loop) on kpemu and on QEMU TCG, same kernel,",
                "           initramfs and memory, whole processes taking turns: each one's cost over a boot that",
                "           runs them 0 times, the ratio kpemu / QEMU (wall, CPU) and peak memory",
                "  smp      several guest CPUs on kpemu and on QEMU TCG -smp N, same files, whole processes: boot to",
                "           power-off with N = 1, 2, 4 (--cpus-list), and one task pinned to each CPU reading /proc/version",
                "           --rounds times under three probes (QEMU: Linux's own kprobes): probe hits per second of guest work",
                "  job      issue 30's probed job (cat /proc/version, a write and a cat of a file in /tmp, --rounds times) under",
                "           kprobes, kretprobes, string and memory fetches and a glob of 287 functions: kpemu against QEMU TCG",
                "           with Linux's own kprobes in the guest, plain runs of both as baselines, each pair taking turns: events,",
                "           wall, CPU, peak memory, the ratios kpemu / QEMU and the cost of an event, (probed - plain) / events",
                "  events   the cost of an event on the job's workload, kpemu alone: a plain and a probed JVM taking turns,",
                "           each running kpemu boot from a snapshot at run_init_process (--rounds and 0 rounds, --repeat pairs, default " + EventBench.PAIRS + "),",
                "           the same guest instructions each time: CPU us per event, median and its 95%% interval over pairs",
                "  watch    data watchpoints on Debian's booted kernel: boots with 16 write watchpoints on read-only data, a",
                "           write watchpoint on jiffies (x86-64) and a read watchpoint, each against a boot without (ratio, hits, us/hit)",
                "  uprobes  user-space probes on Debian's booted kernel, a shell loop calling busybox's test_main: boots with",
                "           " + UprobeBench.UNHIT + " uprobes never hit and with one three-fetcharg uprobe on test_main, each against a boot without"})
final class BenchCommand implements Callable<Integer> {
    enum What { unicorn, probes, boot, snapshot, guest, smp, watch, job, events, uprobes }

    @Parameters(index = "0", paramLabel = "WHAT", description = "what to measure: ${COMPLETION-CANDIDATES}")
    What what;

    @Option(names = "--arch", description = "only this architecture (x86_64 or arm64)")
    String arch;

    @Option(names = "--batches", description = "batches per figure (default: 31 for unicorn, 9 for probes)")
    Integer batches;

    @Option(names = "--per-batch", description = "operations per batch (default: 20000 for unicorn, 100000 probe hits for probes)")
    Integer perBatch;

    @Option(names = "--cold", split = ",", paramLabel = "N", description = "boot: the numbers of unhit probes measured (default 100,1000,10000)")
    List<Integer> cold;

    @Option(names = "--events", paramLabel = "N", description = "boot: getppid() calls of the per-event workload (default ${DEFAULT-VALUE})", defaultValue = "3000000")
    long events;

    @Option(names = "--repeat", paramLabel = "N", description = "boot, snapshot: runs of each boot, the least time kept; guest: rounds, medians kept; job: pairs of runs (default ${DEFAULT-VALUE}; events: " + EventBench.PAIRS + ")", defaultValue = "3")
    int repeat;

    @Option(names = "--benchmarks", split = ",", paramLabel = "NAME", description = "guest: only these benchmarks (default: all of syscall, fault, yield, forkexec, pipe, fs, busybox)")
    List<String> benchmarks;

    @Option(names = "--iterations", split = ",", paramLabel = "NAME=N", description = "guest: another iteration count for a benchmark (repeatable)")
    java.util.Map<String, Long> iterations = new java.util.LinkedHashMap<>();

    @Option(names = "--cpus-list", split = ",", paramLabel = "N", description = "smp: the guest CPU counts measured (default 1,2,4)")
    List<Integer> cpusList;

    @Option(names = "--rounds", paramLabel = "N", description = "smp: reads of /proc/version per pinned task in the probed rows (default " + SmpBench.ROUNDS
            + "); job: rounds of the job (default " + JobBench.ROUNDS + "; events: " + EventBench.ROUNDS + ")")
    Long roundsOption;

    @Option(names = "--zero-rounds", negatable = true, defaultValue = "true", fallbackValue = "true",
            description = "job: each pair also at 0 rounds, for the marginal cost of an event (default on; --no-zero-rounds: without)")
    boolean zeroRounds;

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    /** {@code bench smp}: every arch's runs first (progress on stderr), then the table. */
    private int smp(List<Arch> arches, PrintWriter out) {
        long rounds = roundsOption == null ? SmpBench.ROUNDS : roundsOption;
        if (repeat < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--repeat must be positive");
        if (rounds < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--rounds must be positive");
        List<Integer> counts = cpusList == null ? SmpBench.CPUS : cpusList;
        if (counts.isEmpty() || counts.stream().anyMatch(n -> n < 1 || n > dev.kpemu.boot.BootRunner.Options.MAX_CPUS))
            throw new CommandLine.ParameterException(spec.commandLine(), "--cpus-list takes 1 to " + dev.kpemu.boot.BootRunner.Options.MAX_CPUS);
        java.io.PrintStream progress = WriterOutputStream.printStream(spec.commandLine().getErr());
        List<SmpBench.Result> results = new java.util.ArrayList<>();
        try {
            for (Arch a : arches) results.add(SmpBench.run(a, counts, rounds, repeat, progress));
        } catch (java.io.IOException e) {
            progress.flush();
            spec.commandLine().getErr().println("kpemu: " + e.getMessage());
            return ExitCodes.ERROR;
        }
        progress.flush();
        GuestBench.Machine k = GuestBench.Machine.KPEMU, q = GuestBench.Machine.QEMU;
        out.printf("%-7s %4s %-6s %6s | %8s %8s %6s | %8s %8s %6s | %9s %9s | %8s %8s | %6s %6s%n", "arch", "cpus", "row", "rounds",
                "kpemu", "QEMU", "ratio", "kpemu", "QEMU", "ratio", "kpemu", "QEMU", "kpemu", "QEMU", "kpemu", "QEMU");
        out.printf("%-7s %4s %-6s %6s | %24s | %24s | %19s | %17s | %13s%n", "", "", "", "", "wall s", "CPU s (user+sys)",
                "hits/s of work", "CPU us/hit", "peak MiB");
        for (SmpBench.Result r : results) {
            SmpBench.Row boot = null, plain = null;
            for (SmpBench.Row row : r.rows()) {
                if (row.rounds() == 0) boot = row;
                else if (!row.probed()) plain = row;
                String hk = "-", hq = "-", ck = "-", cq = "-";
                if (row.probed() && boot != null && plain != null) {
                    long hits = 3L * row.cpus() * row.rounds();
                    hk = hitsPerSecond(hits, row.medianWall(k) - boot.medianWall(k));
                    hq = hitsPerSecond(hits, row.medianWall(q) - boot.medianWall(q));
                    ck = String.format("%.2f", (row.medianCpu(k) - plain.medianCpu(k)) / 1e3 / hits);
                    cq = String.format("%.2f", (row.medianCpu(q) - plain.medianCpu(q)) / 1e3 / hits);
                }
                out.printf("%-7s %4d %-6s %6d | %8.2f %8.2f %6s | %8.2f %8.2f %6s | %9s %9s | %8s %8s | %6d %6d%n", r.arch().linuxName(),
                        row.cpus(), row.name(), row.rounds(), row.medianWall(k) / 1e9, row.medianWall(q) / 1e9,
                        ratio(row.medianWall(k), row.medianWall(q)), row.medianCpu(k) / 1e9, row.medianCpu(q) / 1e9,
                        ratio(row.medianCpu(k), row.medianCpu(q)), hk, hq, ck, cq, row.medianPeakKib(k) / 1024, row.medianPeakKib(q) / 1024);
            }
            out.printf("%-7s kernel %s; %d round(s)%n", r.arch().linuxName(), r.release(), repeat);
        }
        out.println("(whole processes, kpemu and QEMU TCG -smp N alternating, same kernel, initramfs, command line and 256 MiB; medians;");
        out.println(" boot: 0 rounds, no probes; plain: one task pinned to each CPU, each reading /proc/version ROUNDS times; probed:");
        out.println(" the same under a kprobe at version_proc_show, one inside it and a kretprobe (3 hits a read); ratio: kpemu / QEMU;");
        out.println(" hits/s of work: 3 x cpus x rounds / (the probed row's wall - the boot row's), the paper's Figure 4 per machine;");
        out.println(" CPU us/hit: (the probed row's CPU - the plain row's) / hits, within the noise of whole-process times)");
        out.flush();
        return ExitCodes.OK;
    }

    /** {@code bench job}: every arch's pairs first (progress on stderr), then the table ({@link JobBench}, {@link JobFigures}). */
    private int job(List<Arch> arches, PrintWriter out) {
        long rounds = roundsOption == null ? JobBench.ROUNDS : roundsOption;
        if (repeat < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--repeat must be positive");
        if (rounds < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--rounds must be positive");
        java.io.PrintStream progress = WriterOutputStream.printStream(spec.commandLine().getErr());
        List<JobBench.Result> results = new java.util.ArrayList<>();
        try {
            for (Arch a : arches) results.add(JobBench.run(a, rounds, repeat, zeroRounds, progress));
        } catch (java.io.IOException | IllegalArgumentException e) {
            progress.flush();
            spec.commandLine().getErr().println("kpemu: " + e.getMessage());
            return ExitCodes.ERROR;
        }
        progress.flush();
        out.printf("%-7s %-6s %6s | %8s %8s %6s | %8s %8s %6s | %8s %8s | %6s %6s%n", "arch", "run", "rounds",
                "kpemu", "QEMU", "ratio", "kpemu", "QEMU", "ratio", "kpemu", "QEMU", "kpemu", "QEMU");
        out.printf("%-7s %-6s %6s | %24s | %24s | %17s | %13s%n", "", "", "", "wall s", "CPU s (user+sys)", "events", "peak MiB");
        for (JobBench.Result r : results) {
            JobFigures.Machine k = r.machines().get(GuestBench.Machine.KPEMU), q = r.machines().get(GuestBench.Machine.QEMU);
            if (k.atZeroRounds() != null) jobRows(out, r.arch(), 0, k.atZeroRounds(), q.atZeroRounds());
            jobRows(out, r.arch(), r.rounds(), k, q);
            out.printf("%-7s per event, us, median [least, greatest] of %d pair(s)%s:%n", r.arch().linuxName(), k.pairs().size(),
                    k.pairs().size() >= 6 ? " (95% confidence interval of the median)" : "");
            out.printf("%-7s   (probed - plain) / events:    CPU kpemu %s, QEMU %s; wall kpemu %s, QEMU %s%n", r.arch().linuxName(),
                    spread(k.cpuMicrosPerEvent()), spread(q.cpuMicrosPerEvent()), spread(k.wallMicrosPerEvent()), spread(q.wallMicrosPerEvent()));
            if (k.atZeroRounds() != null) {
                out.printf("%-7s   marginal, over 0 rounds:      CPU kpemu %s, QEMU %s; wall kpemu %s, QEMU %s%n", r.arch().linuxName(),
                        spread(k.marginalCpuMicrosPerEvent()), spread(q.marginalCpuMicrosPerEvent()),
                        spread(k.marginalWallMicrosPerEvent()), spread(q.marginalWallMicrosPerEvent()));
            }
            out.printf("%-7s kernel %s; %d probes on both machines; %d pair(s)%n", r.arch().linuxName(), r.release(), r.probes(), repeat);
        }
        out.println("(whole processes, QEMU TCG and kpemu taking turns of " + TakingTurns.TURN_MILLIS + " ms, same kernel, initramfs, command line and");
        out.println(" 256 MiB; wall: the time each held the turn; medians over pairs;");
        out.println(" plain: the job without probes; probed: QEMU's guest writes the definitions to tracefs, runs the job, stops tracing and");
        out.println(" reads trace once; kpemu registers them when /init starts (--from-init) and writes its trace to a file; events: event");
        out.println(" lines of each side's trace (kpemu's also hold the init's mounts; QEMU's the enabling); ratio: kpemu / QEMU;");
        out.println(" per event: each pair's probed run minus its plain run over the probed run's events (fixed costs included: kpemu's");
        out.println(" symbol tables and registration, Linux's writes to kprobe_events); marginal: the same pair's rounds' addition over");
        out.println(" the pair at 0 rounds, ((probed - probed0) - (plain - plain0)) / (events - events0): the cost of an event itself;");
        out.println(" a spread as wide as the median is noise, not a cost; from 6 pairs on, the median's 95% interval (order statistics,");
        out.println(" no assumption on the distribution) says what the pairs resolve; issue 30's targets: probed <= 1.0, per event <= 2 us)");
        out.flush();
        return ExitCodes.OK;
    }

    /** {@code bench events}: every arch's pairs first (progress on stderr), then the table ({@link EventBench}). */
    private int events(List<Arch> arches, PrintWriter out) {
        long rounds = roundsOption == null ? EventBench.ROUNDS : roundsOption;
        int pairs = spec.commandLine().getParseResult().hasMatchedOption("--repeat") ? repeat : EventBench.PAIRS;
        if (repeat < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--repeat must be positive");
        if (rounds < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--rounds must be positive");
        java.io.PrintStream progress = WriterOutputStream.printStream(spec.commandLine().getErr());
        List<EventBench.Result> results = new java.util.ArrayList<>();
        try {
            for (Arch a : arches) results.add(EventBench.run(a, rounds, pairs, progress));
        } catch (java.io.IOException | IllegalArgumentException e) {
            progress.flush();
            spec.commandLine().getErr().println("kpemu: " + e.getMessage());
            return ExitCodes.ERROR;
        }
        progress.flush();
        out.printf("%-7s %6s %5s | %-40s | %-40s | %8s | %-44s | %-44s%n", "arch", "rounds", "pairs", "plain CPU s", "probed CPU s", "events",
                "CPU us per event, (probed - plain) / events", "marginal CPU us per event, over 0 rounds");
        for (EventBench.Result r : results) {
            EventBench.Pair first = r.pairs().get(0);
            out.printf("%-7s %6d %5d | %-40s | %-40s | %8d | %-44s | %-44s%n", r.arch().linuxName(), r.rounds(), r.pairs().size(),
                    spread(r.plainCpu()), spread(r.probedCpu()), first.probed().events(), spread(r.perEvent()), spread(r.marginal()));
            out.printf("%-7s marginal CPU us per event from each kind of run's median over the pairs: %.2f%n", r.arch().linuxName(), r.marginalOfMedians());
            out.printf("%-7s kernel %s; guest instructions, plain / probed: %d / %d at %d rounds, %d / %d at 0 rounds; events at 0 rounds %d%n",
                    r.arch().linuxName(), r.release(), first.plain().instructions(), first.probed().instructions(), r.rounds(),
                    first.plain0().instructions(), first.probed0().instructions(), first.probed0().events());
        }
        out.println("(two JVMs with kpemu boot's options, one plain and one probed, run kpemu boot in-process, every run from a snapshot");
        out.println(" at run_init_process, taking turns of " + TakingTurns.TURN_MILLIS + " ms through each pair; CPU: the process's, every thread, over each run; medians over pairs,");
        out.println(" [least, greatest], from 6 pairs on the median's 95% interval (order statistics); marginal: ((probed - probed0) -");
        out.println(" (plain - plain0)) / (events - events0), registration and the trace's header left out; from each kind's median: the same");
        out.println(" arithmetic on the medians of plain, probed, plain0 and probed0 over the pairs; issue 30's target: <= 2 us)");
        out.flush();
        return ExitCodes.OK;
    }

    private static void jobRows(PrintWriter out, Arch arch, long rounds, JobFigures.Machine k, JobFigures.Machine q) {
        out.printf("%-7s %-6s %6d | %8.2f %8.2f %6s | %8.2f %8.2f %6s | %8s %8s | %6d %6d%n", arch.linuxName(), "plain", rounds,
                k.plainWall() / 1e9, q.plainWall() / 1e9, ratio(k.plainWall(), q.plainWall()), k.plainCpu() / 1e9, q.plainCpu() / 1e9,
                ratio(k.plainCpu(), q.plainCpu()), "-", "-", k.plainPeakKib() / 1024, q.plainPeakKib() / 1024);
        out.printf("%-7s %-6s %6d | %8.2f %8.2f %6s | %8.2f %8.2f %6s | %8d %8d | %6d %6d%n", arch.linuxName(), "probed", rounds,
                k.probedWall() / 1e9, q.probedWall() / 1e9, ratio(k.probedWall(), q.probedWall()), k.probedCpu() / 1e9, q.probedCpu() / 1e9,
                ratio(k.probedCpu(), q.probedCpu()), k.events(), q.events(), k.probedPeakKib() / 1024, q.probedPeakKib() / 1024);
    }

    private static String spread(JobFigures.Spread s) {
        if (Double.isNaN(s.median())) return "-";
        String range = String.format("%.2f [%.2f, %.2f]", s.median(), s.min(), s.max());
        return s.hasInterval() ? range + String.format(" (95%% CI %.2f..%.2f)", s.ciLow(), s.ciHigh()) : range;
    }

    private static String hitsPerSecond(long hits, long nanos) {
        return nanos <= 0 ? "-" : String.format("%.0f", hits / (nanos / 1e9));
    }

    /** {@code bench boot}: every arch's boots first (progress on stderr), then the table. */
    private int boot(List<Arch> arches, PrintWriter out) {
        List<BootBench.Result> results = new java.util.ArrayList<>();
        java.io.PrintStream progress = WriterOutputStream.printStream(spec.commandLine().getErr());
        try {
            List<Integer> counts = cold == null ? BootBench.COLD : cold;
            if (counts.isEmpty() || counts.stream().anyMatch(n -> n < 1))
                throw new CommandLine.ParameterException(spec.commandLine(), "--cold needs positive numbers");
            if (repeat < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--repeat must be positive");
            if (events < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--events must be positive");
            for (Arch a : arches) results.add(BootBench.run(a, counts, events, repeat, progress));
        } catch (dev.kpemu.image.KernelImageException e) {
            spec.commandLine().getErr().println("kpemu: " + e.getMessage());
            return ExitCodes.ERROR;
        }
        progress.flush();
        out.printf("%-8s %-62s %7s %14s %9s %7s %9s %12s%n", "arch", "boot", "probes", "instructions", "cpu s", "ratio", "events", "us/event");
        for (BootBench.Result r : results) {
            for (BootBench.Boot b : r.boots()) {
                double ratio = r.ratio(b);
                String perEvent = b.events() == 0 || !b.perEvent() ? "-" : String.format("%.2f", r.microsPerEvent(b));
                out.printf("%-8s %-62s %7d %14d %9.2f %7.3f %9d %12s%s%n", r.arch().linuxName(), b.label(), b.probes(), b.instructions(),
                        b.runNanos() / 1e9, ratio, b.events(), perEvent, b.exitCode() == 0 ? "" : "  (exit " + b.exitCode() + ")");
            }
            BootBench.Boot most = r.mostCold();
            out.printf("%-8s registration of %d probes: %.3f s CPU%n", r.arch().linuxName(), most.probes(), most.registrationNanos() / 1e9);
        }
        out.println("(cpu s: CPU time of the emulation thread from the first guest instruction to power-off, the set-up at the");
        out.println(" registration point excluded (BTF and tables read, probes registered);");
        out.println(" ratio: to the boot without probes, the median over rounds of the row's boot / that round's boot without probes,");
        out.println(" the rows' order rotated each round (getppid rows: least cpu s / the getppid boot without probes');");
        out.println(" us/event: (cpu s - that boot's cpu s) / events (getppid rows: the median over rounds of each round's pair,");
        out.println(" the steady figure); cpu s: least of --repeat boots per row (round robin; the getppid rows first, after a");
        out.println(" warm-up boot), in one process;");
        out.println(" targets: 1,000 unhit <= 1.02, 10,000 <= 1.05,");
        out.println(" registration of 10,000 <= 1 s, <= 1 us per three-fetcharg event)");
        out.flush();
        return ExitCodes.OK;
    }

    /** {@code bench uprobes}: boots with uprobes against a boot without, per arch ({@link UprobeBench}). */
    private int uprobes(List<Arch> arches, PrintWriter out) {
        if (repeat < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--repeat must be positive");
        java.io.PrintStream progress = WriterOutputStream.printStream(spec.commandLine().getErr());
        List<UprobeBench.Result> results = new java.util.ArrayList<>();
        try {
            for (Arch a : arches) results.add(UprobeBench.run(a, repeat, progress));
        } catch (java.io.IOException e) {
            progress.flush();
            spec.commandLine().getErr().println("kpemu: " + e.getMessage());
            return ExitCodes.ERROR;
        }
        progress.flush();
        out.printf("%-8s %-40s %6s %14s %9s %7s %13s %8s%n", "arch", "boot", "probes", "instructions", "cpu s", "ratio", "ratio range", "events");
        for (UprobeBench.Result r : results) {
            for (UprobeBench.Row row : r.rows()) {
                out.printf("%-8s %-40s %6d %14d %9.2f %7.3f %13s %8d%n", r.arch().linuxName(), row.label(), row.probes(), row.instructions(),
                        row.cpuNanos() / 1e9, row.ratio(), row.spread(), row.events());
            }
            List<Double> pe = r.perEventMicros().stream().sorted().toList();
            out.printf("%-8s per event (three fetchargs): median %.2f us, range %.2f..%.2f us over %d rounds%n", r.arch().linuxName(),
                    pe.get(pe.size() / 2), pe.getFirst(), pe.getLast(), pe.size());
        }
        out.println("(cpu s: CPU time of the emulation thread from the first guest instruction to power-off, the set-up at the");
        out.println(" registration point excluded, least of --repeat boots; ratio: median over rounds of the row's boot / that");
        out.println(" round's boot without uprobes, rows rotated each round; per event: each round's (row - no uprobes) / events;");
        out.println(" target: unhit uprobes <= 1.02 with the same instruction count)");
        out.flush();
        return ExitCodes.OK;
    }

    /** {@code bench watch}: boots with data watchpoints against a boot without, per arch ({@link WatchBench}). */
    private int watch(List<Arch> arches, PrintWriter out) {
        if (repeat < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--repeat must be positive");
        java.io.PrintStream progress = WriterOutputStream.printStream(spec.commandLine().getErr());
        List<WatchBench.Result> results = new java.util.ArrayList<>();
        try {
            for (Arch a : arches) results.add(WatchBench.run(a, repeat, progress));
        } catch (dev.kpemu.image.KernelImageException e) {
            progress.flush();
            spec.commandLine().getErr().println("kpemu: " + e.getMessage());
            return ExitCodes.ERROR;
        }
        progress.flush();
        out.printf("%-8s %-42s %14s %9s %7s %9s %9s%n", "arch", "boot", "instructions", "cpu s", "ratio", "hits", "us/hit");
        for (WatchBench.Result r : results) {
            WatchBench.Row base = r.rows().getFirst();
            for (WatchBench.Row row : r.rows()) {
                String perHit = row.hits() == 0 ? "-" : String.format("%.2f", (row.cpuNanos() - base.cpuNanos()) / 1e3 / row.hits());
                out.printf("%-8s %-42s %14d %9.2f %7.3f %9d %9s%n", r.arch().linuxName(), row.label(), row.instructions(),
                        row.cpuNanos() / 1e9, row.ratio(), row.hits(), perHit);
            }
            out.printf("%-8s bare metal: %.2f us per reported store (%,d stores to a watched word against the same loop unwatched)%n",
                    r.arch().linuxName(), r.perHitNanos() / 1e3, WatchBench.STORES);
        }
        out.println("(cpu s: CPU time of the emulation thread from the first guest instruction to power-off, least of --repeat boots;");
        out.println(" ratio: median over rounds of the row's boot / that round's boot without watchpoints, rows rotated each round;");
        out.println(" us/hit: (cpu s - the boot without) / hits, noise when the ratio is within a boot's noise (a few %);");
        out.println(" targets: 16 untouched <= 1.05, jiffies <= 1.2)");
        out.flush();
        return ExitCodes.OK;
    }

    /** {@code bench snapshot}: cold and restored starts of the same probe session, per arch. */
    private int snapshot(List<Arch> arches, PrintWriter out) {
        if (repeat < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--repeat must be positive");
        java.io.PrintStream progress = WriterOutputStream.printStream(spec.commandLine().getErr());
        List<SnapshotBench.Result> results = new java.util.ArrayList<>();
        try {
            for (Arch a : arches) results.add(SnapshotBench.run(a, repeat, progress));
        } catch (dev.kpemu.machine.snapshot.SnapshotException | java.io.IOException e) {
            spec.commandLine().getErr().println("kpemu: " + e.getMessage());
            return ExitCodes.ERROR;
        }
        progress.flush();
        out.printf("%-8s %-20s %14s %8s %8s %8s %8s %8s%n", "arch", "start", "instructions", "wall s", "cpu s", "wall", "cpu", "events");
        for (SnapshotBench.Result r : results) {
            for (SnapshotBench.Row row : List.of(r.cold(), r.restored())) {
                out.printf("%-8s %-20s %14d %8.2f %8.2f %8.3f %8.3f %8d%s%n", r.arch().linuxName(), row.label(), row.instructions(),
                        row.wallNanos() / 1e9, row.cpuNanos() / 1e9, (double) row.wallNanos() / r.cold().wallNanos(),
                        (double) row.cpuNanos() / r.cold().cpuNanos(), row.events(), row.exitCode() == 0 ? "" : "  (exit " + row.exitCode() + ")");
            }
            out.printf("%-8s snapshot: %.1f MiB, %d RAM pages of %d%n", r.arch().linuxName(), r.snapshotBytes() / 1048576.0, r.ramPages(), 256 << 8);
        }
        out.println("(a probe session to power-off, the kernel prepared and the snapshot restored included, in one process:");
        out.println(" wall s and cpu s (all threads) are the least of --repeat runs, alternating; wall and cpu: ratio to the cold start)");
        out.flush();
        return ExitCodes.OK;
    }

    /** {@code bench guest}: every arch's runs first (progress on stderr), then the table. */
    private int guest(List<Arch> arches, PrintWriter out) {
        if (repeat < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--repeat must be positive");
        java.util.Map<String, Long> chosen = new java.util.LinkedHashMap<>();
        try {
            List<String> names = benchmarks == null ? GuestBenchmarks.ALL.stream().map(GuestBenchmarks.Benchmark::name).toList() : benchmarks;
            for (String n : names) chosen.put(n, GuestBenchmarks.named(n).iterations());
            for (var e : iterations.entrySet()) {
                GuestBenchmarks.named(e.getKey());
                if (e.getValue() < 1) throw new IllegalArgumentException("--iterations " + e.getKey() + " must be positive");
                if (chosen.containsKey(e.getKey())) chosen.put(e.getKey(), e.getValue());
            }
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        java.io.PrintStream progress = WriterOutputStream.printStream(spec.commandLine().getErr());
        List<GuestBench.Result> results = new java.util.ArrayList<>();
        try {
            for (Arch a : arches) results.add(GuestBench.run(a, chosen, repeat, progress));
        } catch (java.io.IOException e) {
            progress.flush();
            spec.commandLine().getErr().println("kpemu: " + e.getMessage());
            return ExitCodes.ERROR;
        }
        progress.flush();
        out.printf("%-7s %-9s %10s | %8s %8s %6s | %8s %8s %6s | %9s %9s | %6s %6s%n", "arch", "benchmark", "iterations",
                "kpemu", "QEMU", "ratio", "kpemu", "QEMU", "ratio", "kpemu", "QEMU", "kpemu", "QEMU");
        out.printf("%-7s %-9s %10s | %24s | %24s | %19s | %13s%n", "", "", "", "wall s", "CPU s (user+sys)", "CPU us/iteration", "peak MiB");
        for (GuestBench.Result r : results) {
            GuestBench.Row boot = r.boot();
            for (GuestBench.Row row : java.util.stream.Stream.concat(java.util.stream.Stream.of(boot), r.rows().stream()).toList()) {
                boolean isBoot = row == boot;
                double kw = (row.medianWall(GuestBench.Machine.KPEMU) - (isBoot ? 0 : boot.medianWall(GuestBench.Machine.KPEMU))) / 1e9;
                double qw = (row.medianWall(GuestBench.Machine.QEMU) - (isBoot ? 0 : boot.medianWall(GuestBench.Machine.QEMU))) / 1e9;
                double kc = (row.medianCpu(GuestBench.Machine.KPEMU) - (isBoot ? 0 : boot.medianCpu(GuestBench.Machine.KPEMU))) / 1e9;
                double qc = (row.medianCpu(GuestBench.Machine.QEMU) - (isBoot ? 0 : boot.medianCpu(GuestBench.Machine.QEMU))) / 1e9;
                String perK = isBoot ? "-" : String.format("%.2f", kc * 1e6 / row.iterations());
                String perQ = isBoot ? "-" : String.format("%.2f", qc * 1e6 / row.iterations());
                out.printf("%-7s %-9s %10d | %8.2f %8.2f %6s | %8.2f %8.2f %6s | %9s %9s | %6d %6d%n", r.arch().linuxName(),
                        isBoot ? "boot" : row.name(), row.iterations(), kw, qw, ratio(kw, qw), kc, qc, ratio(kc, qc), perK, perQ,
                        row.medianPeakKib(GuestBench.Machine.KPEMU) / 1024, row.medianPeakKib(GuestBench.Machine.QEMU) / 1024);
            }
            out.printf("%-7s kernel %s; %d round(s)%n", r.arch().linuxName(), r.release(), repeat);
        }
        out.println("(whole processes, kpemu and QEMU TCG taking turns of " + TakingTurns.TURN_MILLIS + " ms (wall: the time each held the turn), same");
        out.println(" kernel, initramfs, command line and 256 MiB; boot: medians of");
        out.println(" boots that run every benchmark 0 times; a benchmark's row: the median of its boots minus the boot's, per machine;");
        out.println(" ratio: kpemu / QEMU, '-' when QEMU's cost is not above 0; peak MiB: median peak resident set; issue 13's target: <= 1.3)");
        out.flush();
        return ExitCodes.OK;
    }

    private static String ratio(long kpemu, long qemu) {
        return qemu <= 0 ? "-" : String.format("%.2f", (double) kpemu / qemu);
    }

    private static String ratio(double kpemu, double qemu) {
        return qemu <= 0 ? "-" : String.format("%.2f", kpemu / qemu);
    }

    @Override public Integer call() {
        int batches = this.batches != null ? this.batches : what == What.unicorn ? 31 : 9;
        int perBatch = this.perBatch != null ? this.perBatch : what == What.unicorn ? 20000 : 100_000;
        if (batches < 1 || perBatch < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--batches and --per-batch must be positive");
        List<Arch> arches = ArchOption.orBoth(spec, arch);
        PrintWriter out = spec.commandLine().getOut();
        if (what == What.boot) return boot(arches, out);
        if (what == What.snapshot) return snapshot(arches, out);
        if (what == What.watch) return watch(arches, out);
        if (what == What.uprobes) return uprobes(arches, out);
        if (what == What.guest) return guest(arches, out);
        if (what == What.smp) return smp(arches, out);
        if (what == What.job) return job(arches, out);
        if (what == What.events) return events(arches, out);
        if (what == What.probes) {
            out.printf("per-hit cost over the unprobed loop, median of %d batches of %d calls%n"
                    + "(targets: kprobe <= 1.0, boosted <= 0.5, kretprobe <= 1.5, optimized <= 0.15 us)%n", batches, perBatch);
            for (Arch a : arches) out.println(OptimizedProbeBench.run(a, perBatch, batches).format());
            out.flush();
            return ExitCodes.OK;
        }
        out.printf("%-8s %-58s %12s %12s %12s%n", "arch", "operation", "median us", "min us", "max us");
        for (Arch a : arches) {
            for (UnicornBench.Result r : UnicornBench.run(a, batches, perBatch)) {
                out.printf("%-8s %-58s %12.3f %12.3f %12.3f%n", a.linuxName(), r.operation(),
                        r.medianNanos() / 1000, r.minNanos() / 1000, r.maxNanos() / 1000);
            }
        }
        out.printf("(%d batches of %d operations each; Unicorn via Java %d FFM)%n", batches, perBatch, Runtime.version().feature());
        out.flush();
        return ExitCodes.OK;
    }
}
