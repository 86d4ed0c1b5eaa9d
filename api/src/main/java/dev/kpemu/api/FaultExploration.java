package dev.kpemu.api;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Consumer;
import java.util.regex.Pattern;

import dev.kpemu.boot.BootHooks;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.BootSnapshot;
import dev.kpemu.boot.GuestTerminal;
import dev.kpemu.boot.LinuxGuest;
import dev.kpemu.boot.MemorySnapshot;
import dev.kpemu.image.CommandGuest;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.kprobes.Kprobe;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.kprobes.SymbolResolver;
import dev.kpemu.kprobes.fail.ErrorInjectionList.EType;
import dev.kpemu.kprobes.fail.FailSpec;
import dev.kpemu.kprobes.fail.FunctionFailure;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.snapshot.SnapshotException;
import dev.kpemu.session.GuestTasks;
import dev.kpemu.session.TracedBoot;

/**
 * Every failure point of a command ({@code kpemu faults}): one run of the command from the
 * snapshot taken where init starts ({@link BootSnapshot}, the cache {@code kpemu boot --snapshot}
 * uses) counts the calls of each site (an error-injectable function) made by the command's tasks
 * after its exec; one run without probes keeps the machine at that exec in memory
 * ({@link MemorySnapshot}); then one run per (site, Nth call) from there with that call failing
 * ({@code FUNC=RETVAL,tree=PID,after=exec,nth=N}), in parallel. Each {@link Row} holds what the
 * command did then, the kernel's messages and the {@code kpemu boot} command line that
 * reproduces it: from the init snapshot, where {@code after=exec} attaches nothing before the
 * command's exec, so it runs the row's instructions and prints the row's trace.
 *
 * <p>The command's tasks: the child of init (pid 1) that executes the command's argv (read at
 * {@value #EXEC_POINT} from the new program's stack) and its descendants ({@code real_parent}
 * chain); the pid comes from the deterministic counting run, and each fork's {@code tree=PID}
 * names the same task. The value returned is Linux's fail_function default for
 * the site's error type ({@link #retvalFor}).
 */
public final class FaultExploration {
    /** The console lines kept as kernel messages: Linux's reports of a kernel problem. */
    public static final Pattern KERNEL_PROBLEM = Pattern.compile("WARNING|BUG|Oops|panic|Call Trace|lockdep|KASAN|kmemleak");
    /** Where an exec has its new program's argv in place and the task's pid: past the point of no return. */
    static final String EXEC_POINT = FunctionFailure.EXEC_POINT;
    /** Linux's EINVAL (include/uapi/asm-generic/errno-base.h). */
    private static final long EINVAL = 22;

    /** One counted call: the site, its number among the command's calls of it (from 1), the callers (%pS, innermost first). */
    public record Call(String function, long nth, List<String> stack) {}

    /**
     * One row: the call that failed ({@code function}, {@code nth}, {@code retval}, the call's
     * {@code stack} from the counting run), what the run did ({@code outcome} as
     * {@link Outcome}'s name, or {@code ERROR: why} when the run could not be made, the command's {@code exit} status or null, the first line of its
     * output, {@code kernelMessages}: the console lines {@link #KERNEL_PROBLEM} matches),
     * {@code injected} (how many calls failed: 1 when the Nth call came as counted) and
     * {@code reproduce}, the {@code kpemu boot} command line of the same run, and {@code trace}, the
     * run's trace as {@code kpemu boot} prints it (its {@code kpemu/fail_function} lines): the
     * printed command's run gives the same bytes.
     */
    public record Row(int index, String function, long nth, long retval, List<String> stack, String outcome, Integer exit,
                      String firstLine, List<String> kernelMessages, int injected, String reproduce, String trace) {}

    /**
     * What the exploration found: the command's pid, the counted calls, the rows run (all, or a
     * shard's); host times: the counting run's whole run, its time from the snapshot's point
     * (restored, probes registered) to the command's exec, the run that keeps the machine at the
     * command's exec in memory, and each row's run from its start to its probes registered at that
     * exec (the restore and the probes' set-up), in wall time and in its thread's CPU time.
     */
    public record Result(int commandPid, List<Call> calls, List<Row> rows, long countingHostNanos, long countingReadyToExecNanos,
                         long execSnapshotNanos, List<Long> forkReadyNanos, List<Long> forkReadyCpuNanos) {}

    private static final java.lang.management.ThreadMXBean THREADS = java.lang.management.ManagementFactory.getThreadMXBean();

    private final Builder b;

    private FaultExploration(Builder b) { this.b = b; }

    public static Builder builder() { return new Builder(); }

    /**
     * The value a failing call returns, by the site's error type: what Linux's fail_function
     * injects when its retval file is not written ({@code adjust_error_retval(addr, 0)}):
     * ERRNO {@code -EINVAL}, NULL and ERRNO_NULL 0, TRUE 1, FALSE 0.
     */
    public static long retvalFor(EType type) {
        return switch (type) {
            case ERRNO -> -EINVAL;
            case NULL, ERRNO_NULL, FALSE -> 0;
            case TRUE -> 1;
        };
    }

    /** Counts, then runs the rows of this shard ({@link Builder#shard}), {@code onRow} as each ends (any order); rows in index order. */
    public Result run(Consumer<Row> onRow) throws IOException {
        Objects.requireNonNull(onRow);
        Path kernel, initrd;
        try {
            kernel = b.kernelChoice instanceof KernelChoice.File f ? f.path() : GuestImages.forRepository().kernel(b.arch, b.kernelChoice);
            byte[] busybox = Files.readAllBytes(GuestImages.forRepository().busybox(b.arch));
            Path dir = Files.createTempDirectory("kpemu-faults-");
            initrd = CommandGuest.initramfs(busybox, b.arch, b.command, false).write(dir.resolve("kpemu-command-guest.cpio"));
        } catch (KernelImageException e) {
            throw new KpemuException(e.getMessage(), e);
        }
        try {
            long t0 = System.nanoTime();
            Counting counting = count(kernel, initrd);
            long countingNanos = System.nanoTime() - t0;
            long t1 = System.nanoTime();
            MemorySnapshot atExec = snapshotAtExec(kernel, initrd, counting.execHits);
            long execSnapshotNanos = System.nanoTime() - t1;
            List<Call> calls = counting.calls;
            List<Call> mine = new ArrayList<>();
            for (int i = 0; i < calls.size(); i++) if (i % b.shardCount == b.shardIndex - 1) mine.add(calls.get(i));
            Row[] rows = new Row[calls.size()];
            long[] forkStart = new long[calls.size()], forkCpu = new long[calls.size()];
            int threads = Math.max(1, Math.min(b.jobs, mine.size()));
            ExecutorService pool = Executors.newFixedThreadPool(threads, r -> new Thread(null, r, "kpemu-fault-fork", 64L << 20));
            try {
                List<Future<?>> futures = new ArrayList<>();
                for (Call c : mine) {
                    int index = calls.indexOf(c);
                    futures.add(pool.submit(() -> {
                        Row row;
                        try {
                            row = fork(kernel, initrd, atExec, index, c, counting.pid, forkStart, forkCpu);
                        } catch (KpemuException e) {     // this run could not be made: its row says why, the others go on
                            row = new Row(index, c.function(), c.nth(), spec(c, counting.pid).retval(), c.stack(), "ERROR: " + e.getMessage(),
                                    null, "", List.of(), 0, reproduce(spec(c, counting.pid)), "");
                        }
                        rows[index] = row;
                        synchronized (onRow) { onRow.accept(row); }
                        return null;
                    }));
                }
                for (Future<?> f : futures) {
                    try {
                        f.get();
                    } catch (java.util.concurrent.ExecutionException e) {
                        if (e.getCause() instanceof RuntimeException re) throw re;
                        if (e.getCause() instanceof IOException io) throw io;
                        throw new KpemuException(String.valueOf(e.getCause()), e.getCause());
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new KpemuException("interrupted", e);
                    }
                }
            } finally {
                pool.shutdownNow();
            }
            List<Row> out = new ArrayList<>();
            List<Long> starts = new ArrayList<>(), cpus = new ArrayList<>();
            for (int i = 0; i < rows.length; i++) {
                if (rows[i] != null) {
                    out.add(rows[i]);
                    starts.add(forkStart[i]);
                    cpus.add(forkCpu[i]);
                }
            }
            return new Result(counting.pid, calls, out, countingNanos, counting.readyToExecNanos, execSnapshotNanos, starts, cpus);
        } finally {
            Files.deleteIfExists(initrd);
            Files.deleteIfExists(initrd.getParent());
        }
    }

    /** The counting run's findings; {@code execHits}: the {@value #EXEC_POINT} entries from the snapshot's point to the command's, its included. */
    private record Counting(int pid, List<Call> calls, long readyToExecNanos, long execHits) {}

    /** The counting run: from the snapshot, the command's task found at its exec, each site's calls by its tree. */
    private Counting count(Path kernel, Path initrd) throws IOException {
        int[] pid = {0};
        long[] readyAt = {0}, execAt = {0}, execHits = {0};
        List<Call> calls = new ArrayList<>();
        Map<String, Long> counts = new TreeMap<>();
        TracedBoot traced = new TracedBoot(List.of(), null).keepRecords(false).armAtInit(true);
        BootHooks hooks = new ArmingHooks(traced, (guest, kprobes) -> {
            readyAt[0] = System.nanoTime();
            GuestTasks tasks = GuestTasks.of(guest, kprobes);
            SymbolResolver symbols = SymbolResolver.of(guest.symbols());
            // the command's task: the child of init that executes the command's argv
            kprobes.register(Kprobe.at(EXEC_POINT, 0).pre((kp, regs) -> {
                if (pid[0] == 0) execHits[0]++;
                if (pid[0] == 0 && tasks.parentPid(regs) == 1 && b.command.equals(tasks.execArgv(regs, b.command.size()))) {
                    pid[0] = tasks.pid(regs);
                    execAt[0] = System.nanoTime();
                }
                return 0;
            }));
            java.util.Set<Long> entries = new java.util.HashSet<>();
            for (String site : b.sites.keySet()) {
                // one function with several names on the list (SYSCALL_DEFINE0's __ia32_sys_getuid is
                // __x64_sys_getuid): counted once, under the first name
                var sym = guest.symbols().byName(site);
                if (sym.isEmpty() || !entries.add(sym.get().address())) continue;
                kprobes.register(Kprobe.at(site, 0).pre((kp, regs) -> {
                    if (pid[0] == 0 || !tasks.descendsFrom(regs, pid[0])) return 0;
                    long n = counts.merge(site, 1L, Long::sum);
                    calls.add(new Call(site, n, FunctionFailure.knownFrames(symbols, FunctionFailure.callers(kprobes, regs))));
                    return 0;
                }));
            }
        });
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = boot(kernel, initrd, hooks, console, OutputStream.nullOutputStream(), null);
        if (pid[0] == 0)
            throw new KpemuException("the command never ran as a program (a shell builtin? run it with sh -c '...'); the guest: " + r.status(), null);
        calls.sort(Comparator.comparing(Call::function).thenComparingLong(Call::nth));
        return new Counting(pid[0], List.copyOf(calls), execAt[0] - readyAt[0], execHits[0]);
    }

    /**
     * The machine at the command's exec, kept in memory: a run from the init snapshot without
     * probes that stops at the {@code execHits}-th entry of {@value #EXEC_POINT} (a host
     * breakpoint; the machine is deterministic, so it is the counting run's command exec) and
     * saves it there. Each row starts from it, and its {@code after=exec} counts from there as the
     * counting run and the printed command count from that exec.
     */
    private MemorySnapshot snapshotAtExec(Path kernel, Path initrd, long execHits) throws IOException {
        MemorySnapshot[] taken = {null};
        BootHooks hooks = new BootHooks() {
            private long at = -1, hits;

            @Override public void ready(LinuxGuest guest) {
                at = guest.symbols().address(EXEC_POINT);
                guest.machine().addBreakpoint(at);
            }

            @Override public boolean breakpoint(LinuxGuest guest, long address) {
                if (address != at || ++hits < execHits) return true;
                taken[0] = MemorySnapshot.take(guest.machine(), EXEC_POINT + " #" + execHits);
                return false;
            }
        };
        BootRunner.Result r = boot(kernel, initrd, hooks, OutputStream.nullOutputStream(), OutputStream.nullOutputStream(), null);
        if (taken[0] == null) throw new KpemuException("the run to the command's exec did not get there: " + r.status(), null);
        return taken[0];
    }

    private Row fork(Path kernel, Path initrd, MemorySnapshot atExec, int index, Call c, int commandPid, long[] forkStart,
                     long[] forkCpu) throws IOException {
        FailSpec spec = spec(c, commandPid);
        List<FunctionFailure.Injection> injections = new java.util.concurrent.CopyOnWriteArrayList<>();
        TracedBoot traced = new TracedBoot(List.of(), null).keepRecords(false).armAtCommandExec(true).fails(List.of(spec), injections::add);
        StringBuilder trace = new StringBuilder();
        traced.addSink(rec -> trace.append(rec.line()).append('\n'));
        long t0 = System.nanoTime(), c0 = THREADS.getCurrentThreadCpuTime();
        ByteArrayOutputStream output = new ByteArrayOutputStream();
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = boot(kernel, initrd, new ArmingHooks(traced, (g, k) -> {
            forkStart[index] = System.nanoTime() - t0;
            forkCpu[index] = THREADS.getCurrentThreadCpuTime() - c0;
        }), console, output, atExec);
        String out = output.toString(StandardCharsets.UTF_8);
        String first = out.isEmpty() ? "" : out.lines().findFirst().orElse("");
        List<String> messages = console.toString(StandardCharsets.UTF_8).lines().filter(l -> KERNEL_PROBLEM.matcher(l).find()).toList();
        return new Row(index, c.function(), c.nth(), spec.retval(), c.stack(), Outcome.of(r.outcome()).name(), r.commandExit(), first,
                messages, injections.size(), reproduce(spec), trace.toString());
    }

    /** The spec of a row: the site's value, the command's task tree from its exec, the Nth call. */
    FailSpec spec(Call c, int commandPid) {
        return FailSpec.parse(c.function() + "=" + retvalFor(b.sites.get(c.function())) + ",tree=" + commandPid + ",after=exec,nth=" + c.nth());
    }

    private String reproduce(FailSpec spec) {
        StringBuilder sb = new StringBuilder("kpemu boot --arch ").append(b.arch.linuxName());
        sb.append(" --kernel ").append(shellQuote(b.kernelChoice.toString()));
        sb.append(" --snapshot --fail ").append(shellQuote(spec.format())).append(" --");
        for (String a : b.command) sb.append(' ').append(shellQuote(a));
        return sb.toString();
    }

    /** {@code s} as one POSIX shell word (single quotes when it needs any). */
    static String shellQuote(String s) {
        if (!s.isEmpty() && s.matches("[A-Za-z0-9_@%+=:,./-]+")) return s;
        return "'" + s.replace("'", "'\\''") + "'";
    }

    /** One run from the init snapshot (the cache), or from {@code atExec} when not null. */
    private BootRunner.Result boot(Path kernel, Path initrd, BootHooks hooks, OutputStream console, OutputStream commandOutput,
                                   MemorySnapshot atExec) throws IOException {
        BootRunner.Options options = new BootRunner.Options(b.arch, kernel, initrd, CommandGuest.commandLine(b.arch, null), 256, b.timeoutSeconds,
                console, null, new GuestTerminal(commandOutput, null), null, false).withCpus(1, dev.kpemu.machine.Schedule.DEFAULT_SEED);
        BootSnapshot snap = BootSnapshot.cache(GuestImages.forRepository().cacheRoot().resolve("snapshots"), b.snapshotNotices);
        try {
            return atExec != null ? BootRunner.bootFrom(options, hooks, atExec) : BootRunner.boot(options, hooks, snap);
        } catch (KernelImageException | SnapshotException e) {
            throw new KpemuException(e.getMessage(), e);
        }
    }

    /** The hooks of one run: {@link TracedBoot}'s, and {@code armed} once its engine is there (the registration point). */
    private static final class ArmingHooks implements BootHooks {
        private final TracedBoot traced;
        private final java.util.function.BiConsumer<LinuxGuest, Kprobes> armed;
        private boolean done;

        ArmingHooks(TracedBoot traced, java.util.function.BiConsumer<LinuxGuest, Kprobes> armed) {
            this.traced = traced;
            this.armed = armed;
        }

        @Override public void ready(LinuxGuest guest) { traced.ready(guest); }

        @Override public boolean breakpoint(LinuxGuest guest, long address) {
            boolean go = traced.breakpoint(guest, address);
            if (go && !done && traced.kprobes() != null) {
                done = true;
                armed.accept(guest, traced.kprobes());
            }
            return go;
        }

        @Override public void finished(LinuxGuest guest) { traced.finished(guest); }
    }

    /** What to explore. */
    public static final class Builder {
        private Arch arch = Arch.X86_64;
        private KernelChoice kernelChoice = KernelChoice.DEFAULT;
        private List<String> command;
        private Map<String, EType> sites = new LinkedHashMap<>();
        private int jobs = Runtime.getRuntime().availableProcessors();
        private int shardIndex = 1, shardCount = 1;
        private double timeoutSeconds = 60;
        private Consumer<String> snapshotNotices = m -> { };

        private Builder() {}

        public Builder arch(Arch a) { this.arch = Objects.requireNonNull(a); return this; }

        /** As {@code kpemu boot --kernel}: {@code debian}, {@code debian:SUITE[@RELEASE]} or a file. */
        public Builder kernel(String choice) { this.kernelChoice = KernelChoice.parse(choice); return this; }

        /** The command, run in kpemu's busybox guest as {@code kpemu boot -- CMD}; its program must be one (not a shell builtin). */
        public Builder command(List<String> argv) {
            if (argv.isEmpty()) throw new IllegalArgumentException("an empty command");
            this.command = List.copyOf(argv);
            return this;
        }

        /** The functions that may fail, with their error types (the kernel's list, {@code kpemu funcs --error-injectable}). */
        public Builder sites(Map<String, EType> sites) { this.sites = new LinkedHashMap<>(sites); return this; }

        /** Runs in parallel (default: the host's cores). */
        public Builder jobs(int n) {
            if (n < 1) throw new IllegalArgumentException("jobs must be at least 1");
            this.jobs = n;
            return this;
        }

        /** Only rows with {@code index % count == index - 1} (the shard {@code index} of {@code count}, from 1). */
        public Builder shard(int index, int count) {
            if (count < 1 || index < 1 || index > count) throw new IllegalArgumentException("shard must be I/N with 1 <= I <= N");
            this.shardIndex = index;
            this.shardCount = count;
            return this;
        }

        /** The guest-time limit of each run (default 60 s). */
        public Builder timeoutSeconds(double s) {
            if (!(s > 0)) throw new IllegalArgumentException("the timeout must be positive");
            this.timeoutSeconds = s;
            return this;
        }

        public Builder snapshotNotices(Consumer<String> sink) { this.snapshotNotices = Objects.requireNonNull(sink); return this; }

        public FaultExploration build() {
            if (command == null) throw new IllegalStateException("no command");
            return new FaultExploration(this);
        }
    }
}
