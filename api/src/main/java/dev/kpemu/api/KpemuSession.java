package dev.kpemu.api;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;

import dev.kpemu.boot.BootHooks;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.BootSnapshot;
import dev.kpemu.boot.GuestTerminal;
import dev.kpemu.boot.LinuxGuest;
import dev.kpemu.session.TracedBoot;
import dev.kpemu.image.CommandGuest;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.btf.Btf;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.kprobes.events.EventEngine;
import dev.kpemu.kprobes.events.KernelSymbols;
import dev.kpemu.kprobes.events.MachineFetchContext;
import dev.kpemu.kprobes.events.TaskLayout;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.snapshot.SnapshotException;

/**
 * One boot of a Linux kernel with Java probes: the library's entry point.
 *
 * <pre>{@code
 * try (KpemuSession s = KpemuSession.builder().arch(Arch.X86_64).kernel("debian:bookworm")
 *         .command("cat", "/etc/hostname").build()) {
 *     Kprobe open = s.register(Kprobe.on("do_sys_openat2")
 *             .pre(ctx -> System.out.println(ctx.comm() + " opens " + ctx.string(ctx.arg("filename")).orElse("(fault)"))));
 *     SessionResult r = s.run();
 * }
 * }</pre>
 *
 * <p>Probes are registered where Linux's {@code kprobe_event=} boot parameter registers its
 * probes — at the return of {@code init_kprobe_trace}, after the kernel's boot-time text patching
 * ({@link Builder#armAtInit}: just before /init) — by the same composition the CLI uses
 * ({@link TracedBoot}): the kprobes engine, the jump optimizer (x86-64's default), and the
 * kprobe_events engine for {@link Builder#events definitions}. {@link #onReady} hands the engine
 * itself to the caller at that point. Everything — boot, registration, handlers — runs on one
 * emulation thread of {@link #run()} (with a large stack, so no {@code -Xss} is needed).
 *
 * <p>No system property is needed: the repository (guest images, native engines) is found from
 * the jar ({@link dev.kpemu.natives.NativeLibraries#repositoryRoot()}).
 */
public final class KpemuSession implements AutoCloseable {
    private final Builder b;
    private final List<Probe> probes = new ArrayList<>();
    private final List<Consumer<Ready>> readyActions = new ArrayList<>();
    private final List<HandlerFailure> failures = Collections.synchronizedList(new ArrayList<>());
    private final List<String> trace = Collections.synchronizedList(new ArrayList<>());
    private volatile Machine machine;
    private volatile boolean stopRequested;
    private String stopWhy;
    private EngineProbes engineProbes;
    private Kprobes kprobes;
    private TracedBoot traced;
    private boolean ran, ready;
    private volatile Thread sessionThread;

    private KpemuSession(Builder b) { this.b = b; }

    public static Builder builder() { return new Builder(); }

    /** The architecture booted. */
    public Arch arch() { return b.arch; }

    /** The virtual CPUs asked for ({@link Builder#cpus}). */
    public int cpus() { return b.cpus; }

    /** The schedule's seed ({@link Builder#schedSeed}). */
    public long schedSeed() { return b.schedSeed; }

    /** The kernel as chosen: {@code debian:SUITE[@RELEASE]}, a file, or {@code debian} (the default). */
    public String kernel() {
        return b.kernelFile != null ? b.kernelFile.toString() : b.kernelChoice != null ? b.kernelChoice.toString() : KernelChoice.DEFAULT.toString();
    }

    /**
     * Registers {@code probe}: now when the session is ready (from an {@link #onReady} action),
     * else when it becomes ready. Returns the probe.
     */
    public synchronized <P extends Probe> P register(P probe) {
        Objects.requireNonNull(probe);
        if (ready) {
            onSessionThread("register");
            registerNow(probe);
        }
        else if (ran) throw new IllegalStateException("the session has ended");
        else probes.add(probe);
        return probe;
    }

    /** Unregisters a registered probe ({@code unregister_kprobe}); only while the session runs (from a ready action). */
    public void unregister(Probe probe) {
        if (!ready) throw new IllegalStateException("unregister while the session runs, from a ready action");
        onSessionThread("unregister");
        engineProbes.unregister(probe);
    }

    /** The engine belongs to the emulation thread (its Capstone handle too): changes come from there. */
    private void onSessionThread(String what) {
        if (Thread.currentThread() != sessionThread)
            throw new IllegalStateException(what + " while the guest runs only from a ready action (the emulation thread), or before run()");
    }

    /**
     * Runs {@code action} when the probes are registered (after the kernel's boot-time text
     * patching), on the emulation thread, with the kprobes engine and the kprobe_events engine.
     */
    public KpemuSession onReady(Consumer<Ready> action) {
        readyActions.add(Objects.requireNonNull(action));
        return this;
    }

    /** What a ready action gets: the engines, once boot-time text patching is done. */
    public interface Ready {
        /** The kprobes engine ({@code register_kprobe} and friends, {@code kprobes/list}). */
        Kprobes kprobes();

        /** The kprobe_events engine (more definitions, enable/disable, filters, {@code hist}). */
        EventEngine events();

        /** Registers a Java probe now. */
        <P extends Probe> P register(P probe);

        /** Guest time now, in nanoseconds. */
        long guestNanos();
    }

    /** Stops the guest from another thread (the session ends with {@link Outcome#STOPPED}). */
    public void stop(String why) {
        stopWhy = why;
        stopRequested = true;
        Machine m = machine;
        if (m != null) m.requestStopFromAnyThread(new dev.kpemu.machine.StopReason.HostRequest(why));
    }

    /** Whether {@link #run()} was called. */
    public synchronized boolean hasRun() { return ran; }

    /** Every handler failure so far. */
    public List<HandlerFailure> handlerFailures() { return List.copyOf(failures); }

    /**
     * Boots the kernel and runs it until it powers off, fails, reaches the time limit or is
     * stopped. Once per session. A probe the kernel refuses makes it throw
     * {@link dev.kpemu.kprobes.KprobeException} (with the kernel's errno); a kernel or initramfs
     * that cannot be found or read, {@link KpemuException}.
     */
    public SessionResult run() {
        synchronized (this) {
            if (ran) throw new IllegalStateException("a session runs once");
            ran = true;
        }
        SessionResult[] result = new SessionResult[1];
        Throwable[] thrown = new Throwable[1];
        Thread t = new Thread(null, () -> {
            try {
                result[0] = boot();
            } catch (Throwable e) {
                thrown[0] = e;
            }
        }, "kpemu-session", 64L << 20);
        sessionThread = t;
        t.start();
        boolean interrupted = false;
        while (true) {
            try {
                t.join();
                break;
            } catch (InterruptedException e) {
                interrupted = true;
                stop("interrupted");
            }
        }
        if (interrupted) Thread.currentThread().interrupt();
        if (thrown[0] instanceof RuntimeException re) throw re;
        if (thrown[0] instanceof Error er) throw er;
        if (thrown[0] != null) throw new KpemuException(thrown[0].getMessage(), thrown[0]);
        return result[0];
    }

    private SessionResult boot() throws IOException {
        Arch arch = b.arch;
        Path kernel, initrd = b.initramfs;
        Path generated = null;
        try {
            kernel = b.kernelFile != null ? b.kernelFile
                    : b.kernelChoice != null ? GuestImages.forRepository().kernel(arch, b.kernelChoice) : null;
            if (initrd == null && b.command != null) {
                byte[] busybox = Files.readAllBytes(GuestImages.forRepository().busybox(arch));
                generated = Files.createTempFile("kpemu-command-guest-", ".cpio");
                initrd = CommandGuest.initramfs(busybox, arch, b.command, false).write(generated);
            }
        } catch (KernelImageException e) {
            throw new KpemuException(e.getMessage(), e);
        }
        ByteArrayOutputStream commandBytes = new ByteArrayOutputStream();
        OutputStream commandOut = b.commandOutput != null ? b.commandOutput : commandBytes;
        GuestTerminal terminal = b.command != null ? new GuestTerminal(commandOut, null) : null;
        String append = b.command != null ? CommandGuest.commandLine(arch, b.append) : b.append;
        // a snapshot is taken (and restored) at run_init_process, before any probe is attached:
        // the probes are registered there, as armAtInit does
        List<String> definitions = new ArrayList<>(b.definitions);
        Map<String, UserProbe> userProbes = new HashMap<>();
        for (UserProbe u : b.userProbes) {
            String event = "u" + userProbes.size();
            userProbes.put(event, u);
            definitions.add(u.definition(event));
        }
        traced = new TracedBoot(definitions, null).keepRecords(false).armAtInit(b.armAtInit || (b.snapshot != null && b.snapshotAtNanos < 0))
                .kernelMessages(b.kernelMessages);
        if (b.optimize != null) traced.optimize(b.optimize);
        // the fail specs armed with the definitions, each injection a kpemu/fail_function trace line
        if (!b.fails.isEmpty()) traced.fails(b.fails, i -> {
            injections.add(i);
            try {
                b.console.write(i.dump().getBytes(StandardCharsets.UTF_8));
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        if (traced.hasUprobeDefinitions()) {
            if (initrd == null) throw new KpemuException("uprobes need the guest's files: give the session a command or an initramfs", null);
            traced.guestFiles(dev.kpemu.kprobes.events.InitramfsFiles.read(Files.readAllBytes(initrd)));
        }
        if (!userProbes.isEmpty()) traced.addSink(r -> {
            if (!r.isUprobe() || !UserProbe.GROUP.equals(r.group())) return;
            UserProbe u = userProbes.get(r.event());
            if (u == null) return;
            u.hits++;
            if (userRegs == null) {
                userRegs = machine.arch() == Arch.X86_64 ? new dev.kpemu.kprobes.x86.X86Regs(machine) : new dev.kpemu.kprobes.arm64.Arm64Regs(machine);
            }
            try {
                u.handler.accept(new UprobeHit(u, r, userRegs));
            } catch (RuntimeException | Error e) {
                failures.add(new HandlerFailure(null, u + " handler", machine.clock().liveNanos(), e));
            }
        });
        traced.addSink(r -> {
            String line = r.line();
            if (b.keepTrace) trace.add(line);
            if (b.traceSink != null) b.traceSink.accept(line);
        });
        BootHooks hooks = new BootHooks() {
            @Override public void ready(LinuxGuest guest) {
                machine = guest.machine();
                if (stopRequested) machine.requestStopFromAnyThread(new dev.kpemu.machine.StopReason.HostRequest(stopWhy));
                traced.ready(guest);
            }

            @Override public boolean breakpoint(LinuxGuest guest, long address) {
                boolean go = traced.breakpoint(guest, address);
                if (go && !ready && traced.kprobes() != null) becomeReady(guest);
                return go;
            }

            @Override public void finished(LinuxGuest guest) { traced.finished(guest); }
        };
        BootRunner.Result r;
        try {
            BootRunner.Options options = bootOptions(b, arch, kernel, initrd, append, terminal);
            r = b.snapshot == null ? BootRunner.boot(options, hooks)
                    : BootRunner.boot(options, hooks, b.snapshotAtNanos < 0 ? BootSnapshot.file(b.snapshot, b.snapshotNotices)
                            : BootSnapshot.file(b.snapshot, b.snapshotNotices).atGuestTime(b.snapshotAtNanos));
        } catch (SnapshotException e) {
            throw new KpemuException(e.getMessage(), e);
        } catch (TracedBoot.DefinitionRejected e) {
            return rejected(e.getMessage(), commandBytes);
        } catch (TracedBoot.SetupRejected e) {
            return rejected(e.getMessage(), commandBytes);
        } catch (KernelImageException e) {
            throw new KpemuException(e.getMessage(), e);
        } finally {
            synchronized (this) { ready = false; }
            if (watchIps != null) watchIps.close();
            if (generated != null) Files.deleteIfExists(generated);
        }
        if (kprobes != null && kprobes.handlerFailures() > 0) {
            // handlers registered on the engine directly (onReady): the engine caught them
            failures.add(new HandlerFailure(null, kprobes.handlerFailures() + " engine handler failure(s), the last", r.guestNanos(),
                    kprobes.lastHandlerFailure()));
        }
        Outcome outcome;
        String status = r.status();
        if (traced.rejectedAtRegistration() != null) {
            outcome = Outcome.REJECTED;
            status = traced.rejectedAtRegistration().getMessage();
        } else {
            outcome = Outcome.of(r.outcome());
        }
        SessionResult.Snapshot snapshot = r.snapshot() == null ? null
                : new SessionResult.Snapshot(r.snapshot().restored(), r.snapshot().file());
        return new SessionResult(outcome, status, r.guestNanos(), r.commandExit(),
                commandBytes.toString(StandardCharsets.UTF_8), r.lastLines(), trace, failures, snapshot);
    }

    /** The user registers the uprobe handlers read (made at the first hit). */
    private dev.kpemu.kprobes.Regs userRegs;

    private SessionResult rejected(String message, ByteArrayOutputStream commandBytes) {
        return new SessionResult(Outcome.REJECTED, message, 0, null, commandBytes.toString(StandardCharsets.UTF_8), List.of(), List.of(), failures, null);
    }

    /** At the registration point: the context for handlers, then the waiting probes, then the ready actions. */
    private void becomeReady(LinuxGuest guest) {
        kprobes = traced.kprobes();
        var structs = traced.kernelStructs();
        if (structs == null) {
            try {
                structs = guest.kernelStructs();
            } catch (KernelImageException e) {
                structs = null;      // no BTF: no names, comm empty and pid 0 (as kpemu's events without it)
            }
        }
        Btf btf = structs == null ? null : structs.btf();
        MachineFetchContext fetch = new MachineFetchContext(guest.machine(), kprobes.regs(), KernelSymbols.permissive(),
                structs == null ? null : TaskLayout.of(structs));
        engineProbes = new EngineProbes(kprobes, new HitContext(guest.machine(), kprobes, fetch, guest.symbols(), btf), failures);
        List<Probe> waiting;
        synchronized (this) {
            ready = true;
            waiting = List.copyOf(probes);
            probes.clear();
        }
        for (Probe p : waiting) registerNow(p);
        armWatchpoints(guest, fetch);
        Ready view = new Ready() {
            @Override public Kprobes kprobes() { return kprobes; }
            @Override public EventEngine events() { return traced.events(); }
            @Override public <P extends Probe> P register(P probe) { return KpemuSession.this.register(probe); }
            @Override public long guestNanos() { return guest.machine().clock().liveNanos(); }
        };
        for (Consumer<Ready> a : readyActions) a.accept(view);
        traced.watchReturnToUser(guest.machine());
    }

    private void registerNow(Probe probe) { engineProbes.register(probe); }

    /** The watchpoints' ip rule (its Capstone handle is closed when the boot ends). */
    private dev.kpemu.kprobes.events.HardwareWatchIp watchIps;

    /** Installs the builder's watchpoints: each place resolved by kallsyms, translated through the guest's page tables. */
    private void armWatchpoints(LinuxGuest guest, MachineFetchContext fetch) {
        if (b.watchpoints.isEmpty()) return;
        Machine m = guest.machine();
        dev.kpemu.kprobes.events.HardwareWatchIp ips = watchIps = new dev.kpemu.kprobes.events.HardwareWatchIp(m);
        for (Watchpoint w : b.watchpoints) {
            long va = resolve(w.place(), guest.symbols());
            try {
                dev.kpemu.kprobes.events.WatchedRange.install(m, va, w.length(), w.watchesReads(), w.watchesWrites(),
                        guest.arch() == Arch.X86_64, (hit, at) -> {
                            try {
                                fetch.begin();
                                w.handlerFn().accept(new WatchAccess(w, ips.of(hit.pc()), hit.pc(), at, hit.physicalAddress(), hit.size(),
                                        hit.write(), hit.oldValue(), hit.newValue(), dev.kpemu.kprobes.events.GuestText.decode(fetch.comm()),
                                        fetch.pid(), hit.cpu(), m.clock().liveNanos(), () -> m.watchpoints().stopAt(hit)));
                            } catch (RuntimeException | AssertionError e) {
                                failures.add(new HandlerFailure(null, "watchpoint " + w, m.clock().liveNanos(), e));
                            }
                        });
            } catch (IllegalArgumentException e) {
                throw new KpemuException("watchpoint " + w + ": " + e.getMessage(), e);
            }
        }
    }

    /** {@code SYM}, {@code SYM+OFFS}, {@code SYM-OFFS} (kallsyms) or an address. */
    static long resolve(String place, dev.kpemu.image.SymbolTable symbols) {
        String p = place.strip();
        try {
            if (p.startsWith("0x") || p.startsWith("0X")) return Long.parseUnsignedLong(p.substring(2), 16);
            if (!p.isEmpty() && Character.isDigit(p.charAt(0))) return Long.parseUnsignedLong(p);
            int cut = -1;
            for (int i = 1; i < p.length() && cut < 0; i++) if (p.charAt(i) == '+' || p.charAt(i) == '-') cut = i;
            String name = cut < 0 ? p : p.substring(0, cut);
            long offset = cut < 0 ? 0 : Long.decode(p.substring(cut));
            var sym = symbols.byName(name);
            if (sym.isEmpty()) throw new KpemuException("watchpoint " + place + ": the kernel's kallsyms has no symbol " + name, null);
            return sym.get().address() + offset;
        } catch (NumberFormatException e) {
            throw new KpemuException("watchpoint " + place + ": not a symbol, SYM+OFFS or an address", e);
        }
    }

    private final List<dev.kpemu.kprobes.fail.FunctionFailure.Injection> injections = new java.util.concurrent.CopyOnWriteArrayList<>();

    /** The injections of the {@link Builder#fail} specs so far, in order. */
    public List<dev.kpemu.kprobes.fail.FunctionFailure.Injection> injections() { return List.copyOf(injections); }

    /** Nothing stays open after {@link #run()}; closing a session that never ran just forgets it. */
    @Override public void close() {}

    /** How to boot: the builder of a {@link KpemuSession}. */
    /** What {@link #run} boots with: the builder's machine choices on the resolved kernel and initramfs. */
    static BootRunner.Options bootOptions(Builder b, Arch arch, Path kernel, Path initrd, String append, GuestTerminal terminal) {
        return new BootRunner.Options(arch, kernel, initrd, append, b.memoryMiB, b.timeoutSeconds,
                b.console, null, terminal, null, b.x86Apic).withCpus(b.cpus, b.schedSeed);
    }

    public static final class Builder {
        private Arch arch = Arch.X86_64;
        private KernelChoice kernelChoice;
        private Path kernelFile, initramfs;
        private List<String> command;
        private String append;
        private int memoryMiB = 256;
        private boolean x86Apic;
        private int cpus = 1;
        private long schedSeed = dev.kpemu.machine.Schedule.DEFAULT_SEED;
        private double timeoutSeconds = 60;
        private OutputStream console = OutputStream.nullOutputStream();
        private OutputStream commandOutput;
        private final List<String> definitions = new ArrayList<>();
        private Consumer<String> traceSink;
        private boolean keepTrace = true;
        private Boolean optimize;
        private boolean armAtInit;
        private Consumer<String> kernelMessages = m -> { };
        private final List<dev.kpemu.kprobes.fail.FailSpec> fails = new ArrayList<>();
        private final List<Watchpoint> watchpoints = new ArrayList<>();
        private final List<UserProbe> userProbes = new ArrayList<>();
        private Path snapshot;
        private Consumer<String> snapshotNotices = m -> { };
        private long snapshotAtNanos = -1;

        private Builder() {}

        /** x86-64 (the default) or arm64. */
        public Builder arch(Arch a) { this.arch = Objects.requireNonNull(a); return this; }

        /**
         * The kernel as {@code kpemu boot --kernel} names it: {@code debian} (the machine's own
         * suite, the default), {@code debian:SUITE}, {@code debian:SUITE@RELEASE}, or a file path.
         * IllegalArgumentException (one line) for an unknown suite.
         */
        public Builder kernel(String choice) {
            KernelChoice c = KernelChoice.parse(choice);
            if (c instanceof KernelChoice.File f) return kernel(f.path());
            this.kernelChoice = c;
            this.kernelFile = null;
            return this;
        }

        /** A kernel image file (x86-64: bzImage or vmlinux; arm64: Image). */
        public Builder kernel(Path file) { this.kernelFile = Objects.requireNonNull(file); this.kernelChoice = null; return this; }

        /** An initramfs of the caller's (default: kpemu's busybox guest, or the command guest with {@link #command}). */
        public Builder initramfs(Path file) { this.initramfs = file; return this; }

        /**
         * A command to run in kpemu's busybox guest ({@code kpemu boot -- CMD}): its output goes
         * to {@link #commandOutput} (default: {@link SessionResult#commandOutput()}), its exit
         * status to {@link SessionResult#commandExit()}; the guest powers off after it.
         */
        public Builder command(String... argv) {
            if (argv.length == 0) throw new IllegalArgumentException("an empty command");
            this.command = List.of(argv);
            return this;
        }

        /** Where the guest command's output goes as it is written. */
        public Builder commandOutput(OutputStream out) { this.commandOutput = out; return this; }

        /** The kernel command line (default: kpemu's, with the console on the first UART). */
        public Builder append(String cmdline) { this.append = cmdline; return this; }

        /**
         * x86-64: the PC with a local APIC and an I/O APIC (the MADT, CPUID's APIC bit), the
         * interrupt controllers of QEMU's {@code pc}, one CPU (default false: the 8259 pair alone).
         * Refused at boot on arm64.
         */
        public Builder x86Apic(boolean on) { this.x86Apic = on; return this; }

        /**
         * The guest's virtual CPUs ({@code kpemu boot --cpus}), 1 to {@link BootRunner.Options#MAX_CPUS}
         * (default 1), run in turn on one host thread on the schedule {@link #schedSeed} names; a
         * {@link #snapshot} carries them all.
         */
        public Builder cpus(int n) {
            if (n < 1 || n > BootRunner.Options.MAX_CPUS)
                throw new IllegalArgumentException("cpus must be 1 to " + BootRunner.Options.MAX_CPUS + ", not " + n);
            this.cpus = n;
            return this;
        }

        /**
         * The seed naming the vCPUs' interleaving ({@code kpemu boot --sched-seed}; default
         * {@link dev.kpemu.machine.Schedule#DEFAULT_SEED}, a round-robin of fixed quanta): the same
         * seed repeats a run.
         */
        public Builder schedSeed(long seed) { this.schedSeed = seed; return this; }

        /** Guest RAM in MiB (default 256, at least 64). */
        public Builder memoryMiB(int mib) {
            if (mib < 64) throw new IllegalArgumentException("memory must be at least 64 MiB");
            this.memoryMiB = mib;
            return this;
        }

        /** The guest-time limit (default 60 s): the session ends with {@link Outcome#TIMEOUT} there. */
        public Builder timeout(Duration guestTime) {
            if (guestTime.isNegative() || guestTime.isZero()) throw new IllegalArgumentException("the timeout must be positive");
            this.timeoutSeconds = guestTime.toNanos() / 1e9;
            return this;
        }

        /** Where the kernel's console goes (default: nowhere; {@link SessionResult#consoleTail()} keeps the last lines). */
        public Builder console(OutputStream out) { this.console = Objects.requireNonNull(out); return this; }

        /**
         * kprobe_events definitions ({@code p:NAME SYM ARGS}, {@code r:...}), one per line, in the
         * booted kernel's dialect: checked before boot as Linux would check them (a refused one
         * ends the session with {@link Outcome#REJECTED}), registered with the Java probes.
         */
        public Builder events(String... lines) {
            definitions.addAll(List.of(lines));
            return this;
        }

        /** Receives every trace line (ftrace's format) as it happens. */
        public Builder traceSink(Consumer<String> sink) { this.traceSink = sink; return this; }

        /** Whether {@link SessionResult#traceLines()} keeps every trace line (default on). */
        public Builder keepTrace(boolean keep) { this.keepTrace = keep; return this; }

        /** Jump optimization on or off (default: on for x86-64, as Linux; off for arm64). */
        public Builder optimize(boolean on) { this.optimize = on; return this; }

        /** Register the probes just before /init instead of where {@code kprobe_event=} does. */
        public Builder armAtInit(boolean atInit) { this.armAtInit = atInit; return this; }

        /**
         * Starts the session from the machine snapshot in {@code file}, or saves one there: when
         * the file exists the guest starts from it, just before /init; otherwise the session boots
         * cold and saves the whole machine to it when it gets there (as {@code kpemu boot
         * --snapshot-file}). The snapshot is taken at {@code run_init_process}, after the kernel's
         * boot-time text patching and before any probe is attached, so the probes (Java and
         * {@link #events}) are registered there in both cases ({@link #armAtInit} is implied), and
         * the session started from the file runs as the one that saved it does: the same trace,
         * timestamps included, to the instruction. The file records what the machine was built
         * from (kernel and initramfs digests, command line, memory, command terminal, kpemu
         * build, Unicorn version); {@link #run()} throws {@link KpemuException} (one line) for a
         * file taken of another boot, corrupt or unreadable. {@link SessionResult#snapshot()}
         * says which happened.
         */
        public Builder snapshot(Path file) { this.snapshot = Objects.requireNonNull(file); return this; }

        /**
         * Takes the {@link #snapshot} at another safe point than {@code run_init_process}: at
         * {@code guestTime}, where an event on the guest clock ends the run between engine slices
         * (never inside a handler). It must come before the probes are registered (a machine with probes
         * attached cannot be saved: the session goes on without a snapshot and says so in a notice);
         * the probes are then registered where they would be without a snapshot ({@link #armAtInit}
         * or {@code kprobe_event=}'s point), in the saving session as in the one started from the
         * file, which continues from the saved point and runs as the saving one does. A file saved
         * at another point is refused, as one of another boot is.
         */
        public Builder snapshotAt(Duration guestTime) {
            if (guestTime.isNegative()) throw new IllegalArgumentException("a snapshot's guest time cannot be negative");
            this.snapshotAtNanos = guestTime.toNanos();
            return this;
        }

        /** Where the session's one-line snapshot notices go ("saved snapshot …", "started from snapshot …"; default: dropped). */
        public Builder snapshotNotices(Consumer<String> sink) { this.snapshotNotices = Objects.requireNonNull(sink); return this; }

        /** Where the kernel's messages about definitions go (default: dropped). */
        /**
         * Makes a function fail as {@code kpemu boot --fail} does (docs/fault-injection.md); repeatable.
         * The injections are in {@link KpemuSession#injections()}; Linux's fail_dump text goes to the console.
         * Not checked against the kernel's error-injection list (the command checks it).
         */
        public Builder fail(Fail fail) { this.fails.add(fail.spec()); return this; }

        public Builder kernelMessages(Consumer<String> sink) { this.kernelMessages = Objects.requireNonNull(sink); return this; }

        /** Watches data for the whole session, from the registration point on ({@link Watchpoint}). */
        public Builder watch(Watchpoint w) { this.watchpoints.add(Objects.requireNonNull(w)); return this; }

        /**
         * A uprobe on a guest file ({@code uprobe_events}' {@code p PATH:OFFSET}), registered with
         * the probes; needs the guest's files: a {@link #command} guest or an {@link #initramfs}.
         */
        public Builder uprobe(Uprobe u) { this.userProbes.add(Objects.requireNonNull(u)); return this; }

        /** A return probe on a function of a guest file ({@code uprobe_events}' {@code r PATH:OFFSET}). */
        public Builder uretprobe(Uretprobe u) { this.userProbes.add(Objects.requireNonNull(u)); return this; }

        public KpemuSession build() { return new KpemuSession(this); }
    }
}
