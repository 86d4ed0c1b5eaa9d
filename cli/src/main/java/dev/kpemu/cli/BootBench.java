package dev.kpemu.cli;

import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootHooks;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.LinuxGuest;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.kprobes.Kprobe;
import dev.kpemu.machine.Arch;
import dev.kpemu.session.TracedBoot;

/**
 * {@code kpemu bench boot}: what probes cost on a booted kernel (Debian's default kernel and
 * kpemu's initramfs, the whole boot to power-off), each figure measured against a boot without
 * probes in the same run.
 *
 * <ul>
 * <li><b>Unhit probes.</b> Boots with 0, 100, 1,000 and 10,000 probes on functions the boot never
 *     calls; the guest's instruction count is shown (unhit probes should change nothing the guest
 *     sees), the CPU time of the guest's execution (from the first instruction to power-off,
 *     the set-up at the registration point excluded: the kernel's BTF and tables read, the probes
 *     registered) is given as a ratio to the boot without probes. Which functions the
 *     boot never calls is found by a survey boot first: every function Linux lets one probe
 *     ({@code p:survey/ *}, {@link dev.kpemu.kprobes.events.ProbeGlob}), each probe disabled at its
 *     first hit; the ones never hit, in name order, evenly spaced, are the cold set.</li>
 * <li><b>Registration</b> of the 10,000 probes at the registration point (CPU time of the emulation thread).</li>
 * <li><b>Per-event cost</b>, the reliable figure: the benchmark guest ({@link GuestBenchmarks}) runs
 *     {@code kbench syscall N} ({@code N} {@code getppid()} calls, about 2 µs of emulation each) after
 *     the boot, and a kprobe_events event on {@link #WORKLOAD_FUNCTION}, which every
 *     {@code getppid()} calls, has three fetchargs, one a string (the task's {@code comm}:
 *     {@code +OFF(%di):string}, the offset of {@code task_struct.comm} from the kernel's BTF); a
 *     kretprobe event on it has {@code $retval}. Each is measured against the same guest without
 *     probes, in back-to-back pairs: with three million events the events are a third (x86-64) to
 *     half (arm64) of the run, so one boot's CPU-time noise (2–5 % of the boot) moves the figure by
 *     about 0.1 µs instead of the ±1–2 µs it moves the slab rows by (a million events: pairs of one
 *     x86-64 run spread over 0.95–1.34 µs, three million: 1.08–1.29, 2026-11-25).</li>
 * <li><b>A hot function probed</b>: the slab allocator's hot functions that take the cache as their
 *     first argument ({@link #HOT}: {@code kmem_cache_alloc}, {@code kmem_cache_alloc_lru} and
 *     {@code should_failslab}, which every allocation calls; about 85,000 calls in the x86 boot, so
 *     a microsecond per event is some 2% of the boot, above the noise of one boot): a kprobe_events
 *     event on each with three fetchargs, one a string (the cache's name: {@code +0(+OFF(%di)):string},
 *     the offset of {@code kmem_cache.name} from the kernel's BTF), and a kretprobe event on each
 *     with {@code $retval}: the boot's slowdown as a ratio, and (host time with the probes − without) /
 *     events, which moves by ±1–2 µs with the boot's own noise.</li>
 * </ul>
 * Every probed boot hands its events to the trace writer {@code kpemu boot} uses
 * ({@link TraceLineWriter}, into a stream that discards the text), so a row costs what a user's
 * run pays on the emulating thread: the fetch, the record and its hand-over; the lines are
 * formatted on the writer's own thread, whose CPU time is not in the rows.
 * Times are CPU time of the emulation thread (a loaded machine stretches wall time far more), the
 * least of {@code repeat} boots run round robin: read the ratios, not the seconds; guest
 * instructions show the runs are the same workload. A row's ratio is the median over rounds of
 * its boot against the same round's boot without probes, the rows' order rotated each round: the
 * least times of rows that do the same work (1, 1,000 and 10,000 unhit probes) differed by 3-7 %
 * in one run, as a boot's CPU time depends on which boots ran before it in the process.
 */
public final class BootBench {
    /** Cold-probe counts measured by default. */
    static final List<Integer> COLD = List.of(100, 1_000, 10_000);

    /**
     * The hot functions of the per-event rows, each present under its 6.1 name or its 6.10+
     * {@code _noprof} one: the slab allocator's, every one with the {@code struct kmem_cache *} first.
     */
    static final List<String> HOT = List.of("kmem_cache_alloc", "kmem_cache_alloc_lru", "should_failslab");

    /** {@code getppid()} calls the workload makes by default ({@code --events}). */
    static final long WORKLOAD_CALLS = 3_000_000;

    /**
     * The function of the workload rows: {@code getppid()} returns {@code task_tgid_vnr(parent)}, i.e.
     * {@code __task_pid_nr_ns(parent, PIDTYPE_TGID, NULL)}, out of line on both arches' kernels.
     */
    static final String WORKLOAD_FUNCTION = "__task_pid_nr_ns";

    /**
     * On the workload's command line: arm64's kernel draws every system call's stack offset from
     * {@code get_random_u16()}, which while the CRNG is not seeded (kpemu's arm64 machine gives the
     * kernel no seed) runs a whole ChaCha20 block and BLAKE2s per call: 9,750 guest instructions a
     * {@code getppid()} instead of 331, so the events were a few percent of the run.
     */
    static final String NO_KSTACK_OFFSET = "randomize_kstack_offset=off";

    /**
     * One boot: its guest instructions, CPU time of the guest's execution, events, registration
     * time; {@code perEvent}: a row of the per-event cost (its events are the hot probes').
     */
    record Boot(String label, int probes, long instructions, long runNanos, long events, long registrationNanos, int exitCode,
                boolean perEvent, boolean workload) {}

    /**
     * All boots of one arch, in order: none, the cold counts, the hot kprobes, the hot kretprobes;
     * then the workload's boots: none, the kprobe event, the kretprobe event.
     */
    record Result(Arch arch, List<String> hotFunctions, List<Boot> boots, java.util.Map<Boot, Double> pairedMicrosPerEvent,
                  java.util.Map<Boot, Double> pairedRatio) {
        /**
         * A row's ratio to its baseline: for the boots without the workload the median over rounds
         * of (the row's boot / the same round's boot without probes), the rows' order rotated from
         * round to round (a boot's CPU time depends on the boots just before it in the process: the
         * JIT recompiles what the previous row's hooks made megamorphic); for the workload's rows
         * the least times' ratio.
         */
        double ratio(Boot b) {
            Double paired = pairedRatio.get(b);
            return paired != null ? paired : (double) b.runNanos() / baselineOf(b).runNanos();
        }

        /**
         * µs per event of a row: for the workload's rows the median over rounds of (the row's boot −
         * the same round's boot without probes) / events, pairs run back to back so the machine's
         * load drifts less between them; for the others (this row − the baseline) / events.
         */
        double microsPerEvent(Boot b) {
            Double paired = pairedMicrosPerEvent.get(b);
            return paired != null ? paired : (b.runNanos() - baselineOf(b).runNanos()) / 1e3 / b.events();
        }

        Boot baseline() { return boots.getFirst(); }

        /** The boot a row is measured against: the workload's own boot without probes for the workload rows. */
        Boot baselineOf(Boot b) { return b.workload() ? boots.get(boots.size() - 3) : baseline(); }

        /** The boot with the most unhit probes (its registration time is reported). */
        Boot mostCold() { return boots.get(boots.size() - 6); }
    }

    private BootBench() {}

    /**
     * Times the guest's execution in CPU time of the emulation thread (Unicorn runs on the calling
     * thread; JIT and GC threads are not counted, nor time the thread waits for a core): from
     * {@code ready} (after the hooks') to {@code finished}.
     */
    private static final class Timed implements BootHooks {
        static final java.lang.management.ThreadMXBean THREADS = java.lang.management.ManagementFactory.getThreadMXBean();
        final BootHooks inner;
        long start, end;

        Timed(BootHooks inner) { this.inner = inner; }

        @Override public void ready(LinuxGuest guest) {
            inner.ready(guest);
            start = THREADS.getCurrentThreadCpuTime();
        }

        /** CPU time inside the hooks' breakpoints: set-up at the registration point (BTF, tables, registration), not the guest's run. */
        long inHooks;

        @Override public boolean breakpoint(LinuxGuest guest, long address) {
            long c0 = THREADS.getCurrentThreadCpuTime();
            try {
                return inner.breakpoint(guest, address);
            } finally {
                inHooks += THREADS.getCurrentThreadCpuTime() - c0;
            }
        }

        @Override public void finished(LinuxGuest guest) {
            end = THREADS.getCurrentThreadCpuTime();
            inner.finished(guest);
        }
    }

    /**
     * @param coldCounts how many unhit probes each cold boot has ({@link #COLD} by default)
     * @param repeat     how many times each boot runs (round robin over the boots, the workload's boots
     *                   among themselves, before the survey boot; the others after it, so the machine's
     *                   load drifts over all of them alike); each row keeps its least CPU time
     */
    static Result run(Arch arch, List<Integer> coldCounts, long workloadCalls, int repeat, PrintStream progress) throws KernelImageException {
        List<String> hot = hotFunctions(arch);
        var btf = KernelStructs.forGuest(GuestImages.forRepository(), arch).btf();
        long nameOffset = btf.offsetOf("kmem_cache", "name").offset();
        long commOffset = btf.offsetOf("task_struct", "comm").offset();
        Path workloadInitrd;
        try {
            workloadInitrd = GuestBenchmarks.initramfs(arch);
        } catch (java.io.IOException e) {
            throw new KernelImageException("the benchmark guest: " + e.getMessage());
        }
        String a0 = arch == Arch.X86_64 ? "%di" : "%x0", a1 = arch == Arch.X86_64 ? "%si" : "%x1";
        List<String> labels = new ArrayList<>();
        List<List<String>> defs = new ArrayList<>();
        String calls = "getppid x" + workloadCalls;
        List<String> workloadLabels = List.of(calls + ", no probes", calls + ", p " + WORKLOAD_FUNCTION + " (3 fetchargs, a string)",
                calls + ", r " + WORKLOAD_FUNCTION + " ret=$retval");
        List<List<String>> workloadDefs = List.of(List.of(),
                List.of("p:wl/task_pid " + WORKLOAD_FUNCTION + " t=" + a0 + " type=" + a1 + " comm=+" + commOffset + "(" + a0 + "):string"),
                List.of("r:wlret/task_pid " + WORKLOAD_FUNCTION + " ret=$retval"));
        // the workload's boots first: the survey boot's 38,000 probes, each disabled at its first hit,
        // leave the JIT's code for a hit slower for the rest of the process (x86: 0.9 -> 1.7 us an event)
        Boot[] workloadBest = new Boot[workloadLabels.size()];
        List<List<Double>> paired = List.of(new ArrayList<>(), new ArrayList<>());
        // and after a boot that is not counted: the first boot of a process carries the JIT's warm-up
        boot(arch, "warm-up (not counted), " + calls, List.of(), true, workloadInitrd, workloadCalls, progress);
        for (int rep = 0; rep < repeat; rep++) {
            Boot none = null;
            for (int i = 0; i < workloadLabels.size(); i++) {
                Boot b = boot(arch, workloadLabels.get(i), workloadDefs.get(i), true, workloadInitrd, workloadCalls, progress);
                if (workloadBest[i] == null || b.runNanos() < workloadBest[i].runNanos()) workloadBest[i] = b;
                if (i == 0) none = b;
                else if (b.events() > 0) paired.get(i - 1).add((b.runNanos() - none.runNanos()) / 1e3 / b.events());
            }
        }
        List<String> cold = coldFunctions(arch, progress);
        labels.add("no probes");
        defs.add(List.of());
        for (int n : coldCounts) {
            if (n > cold.size()) throw new IllegalStateException("only " + cold.size() + " functions are never called in the boot");
            List<String> d = new ArrayList<>(n);
            for (int i = 0; i < n; i++) d.add("p:cold/c" + i + " " + cold.get((int) ((long) i * cold.size() / n)));
            labels.add(n + " unhit probes");
            defs.add(d);
        }
        List<String> entry = new ArrayList<>(), exit = new ArrayList<>();
        for (String f : hot) {
            entry.add("p:hot/" + f + " " + f + " s=" + a0 + " f=" + a1 + " name=+0(+" + nameOffset + "(" + a0 + ")):string");
            exit.add("r:hotret/" + f + " " + f + " ret=$retval");
        }
        labels.add("p " + hot.size() + " slab functions (3 fetchargs, a string)");
        defs.add(entry);
        labels.add("r " + hot.size() + " slab functions ret=$retval");
        defs.add(exit);
        int firstHot = labels.size() - 2;
        Boot[] best = new Boot[labels.size()];
        List<List<Double>> ratios = new ArrayList<>();
        for (int i = 0; i < labels.size(); i++) ratios.add(new ArrayList<>());
        for (int rep = 0; rep < repeat; rep++) {
            Boot[] round = new Boot[labels.size()];
            for (int k = 0; k < labels.size(); k++) {
                int i = (k + rep) % labels.size();      // each round starts one row later
                Boot b = boot(arch, labels.get(i), defs.get(i), i >= firstHot, null, 0, progress);
                round[i] = b;
                if (best[i] == null || b.runNanos() < best[i].runNanos()) best[i] = b;
            }
            for (int i = 1; i < labels.size(); i++) ratios.get(i).add((double) round[i].runNanos() / round[0].runNanos());
        }
        List<Boot> all = new ArrayList<>(List.of(best));
        all.addAll(List.of(workloadBest));
        java.util.Map<Boot, Double> perEvent = new java.util.IdentityHashMap<>();
        for (int i = 1; i < workloadBest.length; i++) if (!paired.get(i - 1).isEmpty()) perEvent.put(workloadBest[i], median(paired.get(i - 1)));
        java.util.Map<Boot, Double> ratio = new java.util.IdentityHashMap<>();
        for (int i = 1; i < best.length; i++) ratio.put(best[i], median(ratios.get(i)));
        return new Result(arch, hot, all, perEvent, ratio);
    }

    private static double median(List<Double> values) {
        List<Double> v = values.stream().sorted().toList();
        int n = v.size();
        return n % 2 == 1 ? v.get(n / 2) : (v.get(n / 2 - 1) + v.get(n / 2)) / 2;
    }

    private static List<String> hotFunctions(Arch arch) throws KernelImageException {
        var syms = dev.kpemu.image.Kallsyms.load(GuestImages.forRepository().kernel(arch)).symbols();
        List<String> out = new ArrayList<>();
        for (String f : HOT) {
            if (syms.byName(f).isPresent()) out.add(f);
            else if (syms.byName(f + "_noprof").isPresent()) out.add(f + "_noprof");
        }
        return out;
    }

    /**
     * One boot; with {@code initrd} the benchmark guest runs {@code calls} {@code getppid()}s (its
     * console is kept to check they all ran: a boot whose workload did not finish exits non-zero).
     */
    private static Boot boot(Arch arch, String label, List<String> defs, boolean perEvent, Path initrd, long calls, PrintStream progress)
            throws KernelImageException {
        TracedBoot traced = defs.isEmpty() ? null : new TracedBoot(defs, null).keepRecords(false).kernelMessages(l -> { });
        // every event goes where `kpemu boot -e` sends it: the trace writer (formatting on its own
        // thread, as `kpemu boot` does), here into a stream that discards the text
        TraceLineWriter lines = traced == null ? null : TraceLineWriter.start(new PrintStream(OutputStream.nullOutputStream()));
        if (lines != null) traced.addSink(lines);
        Timed hooks = new Timed(traced == null ? BootHooks.NONE : traced);
        java.io.ByteArrayOutputStream console = new java.io.ByteArrayOutputStream();
        BootRunner.Result r;
        try {
            r = BootRunner.boot(initrd == null ? options(arch) : workloadOptions(arch, initrd, calls, console), hooks);
        } finally {
            if (lines != null) lines.close();
        }
        int exit = ExitCodes.of(r.outcome());
        if (initrd != null && exit == ExitCodes.OK
                && !console.toString(java.nio.charset.StandardCharsets.UTF_8).contains(GuestBenchmarks.doneLine("syscall", calls)))
            exit = ExitCodes.ERROR;
        long reg = traced == null ? 0 : Math.max(0, traced.registrationCpuNanos());
        Boot b = new Boot(label, traced == null ? 0 : traced.effectiveDefinitions().size(), r.instructions(), hooks.end - hooks.start - hooks.inHooks,
                traced == null ? 0 : traced.eventCount(), reg, exit, perEvent || initrd != null, initrd != null);
        if (progress != null) progress.printf("kpemu: bench boot %s %s: %s, %d instructions, %.2f s%n", arch.linuxName(), label, r.status(),
                r.instructions(), b.runNanos() / 1e9);
        return b;
    }

    private static BootRunner.Options options(Arch arch) {
        PrintStream none = new PrintStream(OutputStream.nullOutputStream());
        return new BootRunner.Options(arch, null, null, null, 256, 60, OutputStream.nullOutputStream(), none);
    }

    private static BootRunner.Options workloadOptions(Arch arch, Path initrd, long calls, OutputStream console) {
        PrintStream none = new PrintStream(OutputStream.nullOutputStream());
        String cmdline = GuestBenchmarks.commandLine(arch, java.util.Map.of("syscall", calls)) + " " + NO_KSTACK_OFFSET;
        return new BootRunner.Options(arch, null, initrd, cmdline, 256, 300, console, none);
    }

    /**
     * The functions the boot never calls, in name order: a survey boot probes every function Linux
     * accepts a probe on and disables each probe at its first hit (so a hot function costs one hit).
     */
    public static List<String> coldFunctions(Arch arch, PrintStream progress) throws KernelImageException {
        Set<Long> fired = new HashSet<>();      // by address: aliases (two names, one address) share a probe point
        TracedBoot[] t = new TracedBoot[1];
        t[0] = new TracedBoot(List.of("p:survey/ *"), null).keepRecords(false).optimize(false).kernelMessages(l -> { })
                .addSink(r -> {
                    fired.add(r.ip());
                    for (Kprobe k : t[0].kprobes().probesAt(r.ip())) if (!k.isDisabled()) t[0].kprobes().disable(k);
                });
        BootRunner.Result r = BootRunner.boot(options(arch), t[0]);
        if (r.outcome() != BootOutcome.POWERED_OFF) throw new IllegalStateException("survey boot: " + r.status());
        var syms = dev.kpemu.image.Kallsyms.load(GuestImages.forRepository().kernel(arch)).symbols();
        TreeSet<String> cold = new TreeSet<>();
        for (String d : t[0].effectiveDefinitions()) {
            String name = d.split("\\s+")[1];                 // p:survey/p_NAME_0 NAME
            if (!fired.contains(syms.address(name))) cold.add(name);
        }
        if (progress != null) progress.printf("kpemu: bench boot %s survey: %d functions probed, %d called, %d never called%n",
                arch.linuxName(), t[0].effectiveDefinitions().size(), t[0].effectiveDefinitions().size() - cold.size(), cold.size());
        return List.copyOf(cold);
    }
}
