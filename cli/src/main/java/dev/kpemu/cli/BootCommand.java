package dev.kpemu.cli;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootHooks;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.GuestTerminal;
import dev.kpemu.boot.HostStop;
import dev.kpemu.boot.TerminalInput;
import dev.kpemu.machine.StopReason;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.kprobes.events.EventSetup;
import dev.kpemu.kprobes.events.RecordedTrace;
import dev.kpemu.kprobes.events.RecordedTraceReader;
import dev.kpemu.kprobes.events.TraceComparison;
import dev.kpemu.machine.Arch;
import dev.kpemu.session.TracedBoot;

/**
 * {@code kpemu boot}: boots a Linux kernel (by default Debian's, with the default initramfs),
 * optionally with kprobe_events definitions, and exits with the guest's outcome. The trace (and
 * the tables asked for) to stdout; guest console to stderr (or {@code --console}); kpemu's own
 * lines to stderr. {@code --record} writes the trace with its header to a file, {@code --expect}
 * compares the run with such a file (exit {@link ExitCodes#TRACE_DIFFERS} on a difference),
 * {@code --perfetto} writes it as trace-event JSON.
 */
@Command(name = "boot", mixinStandardHelpOptions = true,
        description = {"Boot a Linux kernel until it powers off, optionally with kprobe_events probes.",
                "Default: Debian's current kernel and kpemu's initramfs; probe hits print as ftrace's trace lines."},
        footer = {"", "Run your own program: kpemu boot --arch x86_64 --add ./prog:/bin/prog -e 'p:myopen do_sys_openat2' -- prog ARGS",
                "", "Exit codes: 0 the guest powered off (and, with --expect, the trace equals the golden), 1 error,",
                "2 usage or probe-definition error, 3 guest panic or unhandled guest fault, 4 timeout,",
                "5 the trace differs from --expect's golden (the diff is on stderr), 130/143 stopped by SIGINT/SIGTERM.",
                "With -- CMD: the command's exit status when it ran to its end."})
final class BootCommand implements Callable<Integer> {
    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Option(names = "--arch", required = true, paramLabel = "ARCH", description = "x86_64 or arm64")
    String arch;

    @Option(names = "--kernel", paramLabel = KernelOption.LABEL,
            description = "kernel to boot: an image file (x86_64: bzImage or vmlinux; arm64: Image, as Debian's vmlinuz), or " + KernelOption.HELP)
    String kernel;

    @Option(names = "--initrd", paramLabel = "FILE", description = "initramfs (default: kpemu's busybox guest)")
    Path initrd;

    @Option(names = "--append", paramLabel = "ARGS",
            description = "kernel command line (default: the arch's console and nokaslr; with a command, the console is added when ARGS name none)")
    String append;

    @Option(names = "--memory", paramLabel = "MiB", defaultValue = "256", description = "guest RAM, 64 to " + dev.kpemu.boot.BootRunner.Options.MAX_MEMORY_MIB + " (default ${DEFAULT-VALUE})")
    int memoryMiB;

    @CommandLine.Mixin CpuOptions cpuOptions = new CpuOptions();

    @Option(names = "--x86-apic", hidden = true,
            description = "x86_64: the PC with a local APIC and an I/O APIC (the MADT, CPUID's APIC bit), as QEMU's pc; default: the 8259 pair alone")
    boolean x86Apic;

    @Option(names = "--timeout", paramLabel = "SECONDS",
            description = "limit in guest seconds, held also while the guest idles (default 60; none with -i)")
    Double timeoutSeconds;

    @Option(names = "--console", paramLabel = "FILE|-",
            description = "the kernel's console: a file, or - for stderr (default: stderr; hidden when a command runs)")
    String console;

    @Parameters(paramLabel = "CMD", arity = "0..*",
            description = "after --: a command to run in the guest instead of the default workload (busybox applets in PATH); kpemu exits with its exit status")
    List<String> command = new ArrayList<>();

    @Option(names = "--add", paramLabel = "HOSTPATH[:GUESTPATH]",
            description = "copy a host file or directory into the guest's initramfs (repeatable; default guest path /NAME)")
    List<String> add = new ArrayList<>();

    @Option(names = "--command-output", paramLabel = "FILE|-",
            description = "where the command's stdout and stderr go: a file, or - for stderr (default)")
    String commandOutput;

    @Option(names = {"-i", "--interactive"},
            description = "the command's terminal (a busybox shell without a command) on this terminal, with input; Ctrl-A x stops kpemu")
    boolean interactive;

    @Option(names = "--record-input", paramLabel = "FILE", description = "with -i: write what was typed, with its guest times, for --input")
    Path recordInput;

    @Option(names = "--input", paramLabel = "FILE", description = "replay input recorded with --record-input (no terminal needed; the same run every time)")
    Path input;

    @Option(names = {"-e", "--event"}, paramLabel = "DEF", description = "a kprobe_events definition (repeatable), e.g. 'p:myopen do_sys_openat2 dfd=%%di'")
    List<String> events = new ArrayList<>();

    @Option(names = "--fail", paramLabel = "SPEC",
            description = "make a function fail (repeatable): 'FUNC=RETVAL[,nth=N][,times=N][,interval=N][,probability=P][,space=N][,comm=NAME][,pid=N][,tree=PID][,caller=SYM][,verbose=0|1|2]' (docs/fault-injection.md)")
    List<String> fail = new ArrayList<>();

    @Option(names = "--events-file", paramLabel = "FILE", description = "definitions, one per line as written to kprobe_events")
    Path eventsFile;

    @Option(names = "--system-map", paramLabel = "FILE",
            description = "the booted kernel's System.map: data symbols for w: events that its kallsyms lacks (Debian's arm64 kernels; the real file is in Debian's linux-image-RELEASE-dbg package); used when it agrees with the kernel's kallsyms")
    Path systemMapFile;

    @Option(names = "--uprobes-in-workload", description = "enable uprobe events only during the guest's workload (from the line its /init prints before it to the one after), as Linux's recordings enable them; default: from the registration point")
    boolean uprobesInWorkload;

    @Option(names = "--profile", description = "print kprobe_profile (hits, misses) when the guest stops")
    boolean profile;

    @Option(names = "--list", description = "print the probe list (debugfs kprobes/list) and kprobe_events when the guest stops")
    boolean list;

    @Option(names = "--optimize", negatable = true, paramLabel = "BOOL",
            description = "jump-optimize the probes the safety rules accept ([OPTIMIZED] in --list); default on for x86_64 (as Linux), off for arm64 (kpemu's own extension); --no-optimize turns it off")
    Boolean optimize;

    @Option(names = "--formats", description = "print each event's format description")
    boolean formats;

    @Option(names = "--from-init",
            description = "register the probes just before /init runs instead of where Linux's kprobe_event= boot parameter does (during the fs initcalls): nothing of the kernel's own boot is traced")
    boolean fromInit;

    @Option(names = "--snapshot",
            description = "start from a snapshot of this boot's machine taken at run_init_process (cached in .cache/snapshots, keyed by kernel, initramfs, command line, memory, machine and kpemu build); the first such boot boots cold and saves it. Probes are registered there (as --from-init). A cached snapshot that cannot be used is reported and the boot is cold")
    boolean snapshot;

    @Option(names = "--snapshot-file", paramLabel = "FILE",
            description = "as --snapshot with the snapshot in FILE: restored when FILE exists (a corrupt file or one of another boot is an error, exit " + ExitCodes.SNAPSHOT_REFUSED + "), else saved there")
    Path snapshotFile;

    @Option(names = "--dialect", paramLabel = DialectOption.LABEL, description = DialectOption.HELP)
    String dialect;

    @Option(names = "--allow-unsafe",
            description = "accept probes Linux refuses (kprobe blacklist, notrace functions, jump-label and static-call sites, init text after boot): kpemu's extension, beyond Linux")
    boolean allowUnsafe;

    @Option(names = "--record", paramLabel = "FILE",
            description = "write the trace to FILE with a header naming the kernel build, arch, kpemu version, command line, initramfs and the definitions: a golden for --expect and kpemu compare")
    Path record;

    @Option(names = "--expect", paramLabel = "FILE",
            description = "compare the trace event by event with a recorded golden; a difference prints a diff on stderr and exits 5")
    Path expect;

    @Option(names = "--mode", paramLabel = "MODE", defaultValue = "auto",
            description = "how --expect compares: auto (exact on the golden's kernel build, else tolerant), exact, tolerant (symbol sizes and offsets a rebuild moves are ignored); default ${DEFAULT-VALUE}")
    String mode;

    @Option(names = "--modules", paramLabel = "NAME[,NAME…]",
            description = "load the booted Debian kernel's own modules (and their dependencies) before the guest's init (repeatable); "
                    + "probes on MOD:SYM arm when the module loads")
    List<String> modules = new ArrayList<>();

    @Option(names = "--perfetto", paramLabel = "FILE|-",
            description = "write the trace as Chrome/Perfetto trace-event JSON (ui.perfetto.dev, chrome://tracing); - writes it to stdout instead of the text trace")
    String perfetto;

    @Option(names = {"-o", "--output"}, paramLabel = "FILE",
            description = "write the trace to FILE instead of standard output")
    Path output;

    @Option(names = "--format", paramLabel = "FORMAT", defaultValue = "ftrace",
            description = "the trace's format: ftrace (the trace file's lines; default) or json (one JSON object per event and line, typed fields: docs/json-trace.md)")
    String format;

    @Option(names = "--filter", paramLabel = "EVENT:EXPR",
            description = "an event filter as ftrace's events/GROUP/EVENT/filter takes it (repeatable), e.g. 'myopen:fn ~ \"/tmp/*\" && common_pid != 1'; only matching events are traced")
    List<String> filters = new ArrayList<>();

    @Option(names = "--trigger", paramLabel = "EVENT:hist:...",
            description = "a trigger as ftrace's events/GROUP/EVENT/trigger takes it (repeatable): hist, e.g. 'myopen:hist:keys=fn:vals=hitcount:sort=hitcount.descending' (its hist file is printed when the guest stops), or a wprobe's set_wprobe/clear_wprobe (linux-next), e.g. 'open:set_wprobe:fpos:file+64'")
    List<String> triggers = new ArrayList<>();

    @Option(names = "--disable", paramLabel = "EVENT",
            description = "leave EVENT disabled (repeatable): not traced, but its hist triggers still count, as in Linux")
    List<String> disabled = new ArrayList<>();

    @Override public Integer call() throws IOException {
        dev.kpemu.boot.PhaseLog.mark("command line parsed");
        cpuOptions.check(spec);
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        Arch a = ArchOption.one(spec, arch);
        dev.kpemu.image.KernelChoice choice = KernelOption.parse(spec, kernel);
        String memory = dev.kpemu.boot.BootRunner.Options.memoryProblem(a, memoryMiB, x86Apic || cpuOptions.cpus > 1);
        if (memory != null) throw new CommandLine.ParameterException(spec.commandLine(), memory);
        if (timeoutSeconds != null && !(timeoutSeconds > 0)) throw new CommandLine.ParameterException(spec.commandLine(), "--timeout must be positive");
        GuestCommandOptions gc = guestCommandOptions();
        double timeout = timeoutSeconds != null ? timeoutSeconds : interactive ? Double.POSITIVE_INFINITY : 60;
        List<InputScript.Entry> replay = null;
        if (input != null) {
            try {
                replay = InputScript.read(input);
            } catch (NoSuchFileException e) {
                throw new CommandLine.ParameterException(spec.commandLine(), "no such file: " + input);
            } catch (InputScript.MalformedInputException e) {
                err.println("kpemu: " + e.getMessage());
                return ExitCodes.USAGE;
            }
        }
        List<String> defs = definitions();
        dev.kpemu.kprobes.events.SystemMap systemMap = null;
        if (systemMapFile != null) {
            try {
                systemMap = dev.kpemu.kprobes.events.SystemMap.read(systemMapFile);
            } catch (NoSuchFileException e) {
                throw new CommandLine.ParameterException(spec.commandLine(), "no such file: " + systemMapFile);
            } catch (IOException | IllegalArgumentException e) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--system-map: " + e.getMessage());
            }
        }
        TraceComparison.Choice choice2 = CompareCommand.choice(spec, mode);
        if ((record != null || expect != null || perfetto != null) && defs.isEmpty())
            throw new CommandLine.ParameterException(spec.commandLine(), "--record, --expect and --perfetto need probe definitions (-e or --events-file)");
        if (!format.equals("ftrace") && !format.equals("json"))
            throw new CommandLine.ParameterException(spec.commandLine(), "--format takes ftrace or json, not '" + format + "'");
        boolean json = format.equals("json");
        if (json && output == null && "-".equals(perfetto))
            throw new CommandLine.ParameterException(spec.commandLine(), "--format json and --perfetto - both write to standard output: give the trace a file with -o FILE");
        EventSetup setup = new EventSetup();
        try {
            filters.forEach(setup::filter);
            triggers.forEach(setup::trigger);
            disabled.forEach(setup::disable);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        if (!setup.isEmpty() && defs.isEmpty())
            throw new CommandLine.ParameterException(spec.commandLine(), "--filter, --trigger and --disable need probe definitions (-e or --events-file)");
        if (expect != null) {
            RecordedTrace.Header gh;
            try {
                gh = RecordedTraceReader.check(expect);       // the whole golden checked before the boot, keeping nothing
            } catch (NoSuchFileException e) {
                throw new CommandLine.ParameterException(spec.commandLine(), "no such file: " + expect);
            } catch (java.nio.file.FileSystemException e) {
                throw new CommandLine.ParameterException(spec.commandLine(), "cannot read " + expect + ": " + e.getReason());
            } catch (RecordedTrace.MalformedTraceException e) {
                err.println("kpemu: " + e.getMessage());
                return ExitCodes.ERROR;
            }
            if (gh.arch() != a) {
                err.println("kpemu: " + expect + " was recorded on " + gh.arch().linuxName() + ", this boot is " + a.linuxName());
                return ExitCodes.USAGE;
            }
        }
        Path generated = null;
        if (gc.commandGuest() || !add.isEmpty()) {
            try {
                generated = GuestInitramfs.write(a, command, gc.session(), add);
            } catch (KernelImageException e) {
                err.println("kpemu: " + e.getMessage());
                return ExitCodes.USAGE;
            }
        }
        OutputStream traceFile;
        try {
            traceFile = output == null ? null : Files.newOutputStream(output);
        } catch (IOException e) {
            err.println("kpemu: cannot write " + output + ": " + e.getMessage());
            return ExitCodes.ERROR;
        }
        OutputStream traceStream = traceFile != null ? traceFile : "-".equals(perfetto) ? null : WriterOutputStream.printStream(out);
        JsonTraceWriter jsonTrace = json && traceStream != null ? new JsonTraceWriter(traceStream) : null;
        PrintStream trace = json || traceStream == null ? null
                : traceStream instanceof PrintStream ps ? ps : new PrintStream(traceStream, false, dev.kpemu.kprobes.events.GuestText.CHARSET);
        // tables and hist files follow the trace on stdout, unless stdout holds JSON lines
        PrintWriter tables = json && traceFile == null ? err : out;
        PrintStream messages = WriterOutputStream.printStream(err);
        // trace lines are formatted and written off the emulating thread (TraceLineWriter)
        List<dev.kpemu.kprobes.fail.FailSpec> failSpecs = new ArrayList<>();
        for (String f : fail) {
            try {
                failSpecs.add(dev.kpemu.kprobes.fail.FailSpec.parse(f));
            } catch (IllegalArgumentException e) {
                err.println("kpemu: " + e.getMessage());
                return ExitCodes.USAGE;
            }
        }
        if (!failSpecs.isEmpty() && !allowUnsafe) {
            String refused;
            try {
                refused = ErrorInjectionCheck.refusal(choice, a, failSpecs);
            } catch (IOException e) {
                refused = "--fail: cannot read the error-injection list: " + e.getMessage();
            }
            if (refused != null) {
                err.println("kpemu: " + refused);
                return ExitCodes.USAGE;
            }
        }
        TracedBoot traced = defs.isEmpty() && failSpecs.isEmpty() ? null : new TracedBoot(defs, null).setup(setup).keepRecords(false).systemMap(systemMap);
        if (traced != null && !failSpecs.isEmpty()) traced.fails(failSpecs, i -> {
            err.println("kpemu: fail_function: " + i.function() + " retval=" + i.retval() + " comm=" + i.comm() + " pid=" + i.pid());
            err.print(i.dump());
            err.flush();
        });
        TraceLineWriter textTrace = traced == null || trace == null ? null : TraceLineWriter.start(trace);
        if (textTrace != null) traced.addSink(textTrace);
        if (traced != null && jsonTrace != null) traced.addSink(jsonTrace);
        if (traced != null && optimize != null) traced.optimize(optimize);
        if (snapshot && snapshotFile != null)
            throw new CommandLine.ParameterException(spec.commandLine(), "--snapshot and --snapshot-file: give one");
        if ((snapshot || snapshotFile != null) && (interactive || input != null))
            throw new CommandLine.ParameterException(spec.commandLine(), "--snapshot and --snapshot-file do not go with -i or --input (typed input is host state a snapshot does not carry)");
        dev.kpemu.boot.BootSnapshot snap = snapshotFile != null ? dev.kpemu.boot.BootSnapshot.file(snapshotFile, line -> { err.println(line); err.flush(); })
                : snapshot ? dev.kpemu.boot.BootSnapshot.cache(dev.kpemu.image.GuestImages.forRepository().cacheRoot().resolve("snapshots"), line -> { err.println(line); err.flush(); })
                : null;
        if (traced != null) traced.armAtInit(fromInit || snap != null).allowUnsafe(allowUnsafe).kernelMessages(line -> { err.println(line); err.flush(); });
        String consoleTo = console != null ? console : gc.commandGuest() ? null : "-";
        OutputStream con = consoleTo == null ? null : "-".equals(consoleTo) ? System.err : openForWriting(Path.of(consoleTo));
        HostStop hostStop = new HostStop();
        InputScript.Writer recorder = null;
        InteractiveTerminal term = null;
        OutputStream commandOut = null;
        if (traced != null) traced.dialect(DialectOption.parse(spec, dialect));
        StreamedOutputs outputs = null;
        OutputStream perfettoFile = null;
        try {
            if (interactive) {
                if (recordInput != null) {
                    openForWriting(recordInput).close();     // a path that cannot be written: one line, before the terminal changes
                    recorder = new InputScript.Writer(recordInput);
                }
                term = InteractiveTerminal.open(hostStop, recorder);
                if (term == null) {
                    err.println("kpemu: -i needs a terminal (standard input and output are not one); replay recorded input with --input FILE");
                    return ExitCodes.USAGE;
                }
            }
            GuestTerminal terminal = null;
            if (gc.commandGuest()) {
                commandOut = term != null ? term.output()
                        : commandOutput == null || "-".equals(commandOutput) ? messages : new java.io.BufferedOutputStream(openForWriting(Path.of(commandOutput)));
                TerminalInput in = term != null ? term : replay != null ? new ReplayedInput(replay, hostStop) : null;
                terminal = new GuestTerminal(commandOut, in);
            }
            BootRunner.Result r;
            Path kernelFile, initrdFile;
            Map<String, String> version = Map.of();
            try (Signals signals = Signals.stopOn(hostStop)) {
                try {
                    kernelFile = KernelOption.file(choice, a);
                    initrdFile = generated != null ? generated : initrd != null ? initrd : dev.kpemu.image.GuestImages.forRepository().initramfs(a);
                    List<String> moduleNames = GuestModules.names(modules);
                    if (!moduleNames.isEmpty()) initrdFile = GuestModules.withModules(initrdFile, a, choice, moduleNames);
                    if (traced != null && traced.hasUprobeDefinitions())
                        traced.guestFiles(dev.kpemu.kprobes.events.InitramfsFiles.read(Files.readAllBytes(initrdFile)))
                                .uprobesInWorkload(uprobesInWorkload);
                    if (choice instanceof dev.kpemu.image.KernelChoice.Debian d && (record != null || expect != null || perfetto != null))
                        version = dev.kpemu.image.GuestImages.forRepository().kernelVersion(a, d);
                    if (traced != null && (record != null || expect != null || perfetto != null)) {
                        OutputStream perfettoJson = perfetto == null ? null : "-".equals(perfetto) ? WriterOutputStream.printStream(out)
                                : (perfettoFile = Files.newOutputStream(Path.of(perfetto)));
                        Map<String, String> v = version;
                        Path kf = kernelFile, rf = initrdFile;
                        outputs = new StreamedOutputs(a, traced.headerDefinitions(), record, perfettoJson,
                                expect == null ? null : RecordedTraceReader.open(expect), choice2, () -> header(traced, a, v, kf, rf));
                        traced.addSink(outputs);
                    }
                    try (Progress p = Progress.start("kpemu", gc.commandGuest() || "-".equals(consoleTo),
                            () -> traced == null ? -1 : traced.guestNanos(), () -> traced == null ? 0 : traced.eventCount())) {
                        // with a command, stderr carries its output: kpemu's start-up lines stay out of it
                        r = BootRunner.boot(cpuOptions.apply(new BootRunner.Options(a, kernelFile, initrdFile,
                                        gc.commandGuest() ? dev.kpemu.image.CommandGuest.commandLine(a, append) : append, memoryMiB, timeout, con,
                                        gc.commandGuest() ? null : messages,
                                        terminal, hostStop, x86Apic), spec),
                                traced == null ? BootHooks.NONE : traced, snap);
                    }
                } catch (TracedBoot.DefinitionRejected e) {
                    e.kernelMessages().forEach(err::println);
                    err.println(e.error().logged() ? e.error().errorLog() : "kpemu: definition rejected (" + e.error().errno() + ")");
                    return ExitCodes.USAGE;
                } catch (dev.kpemu.kprobes.events.UprobeSymbolPlaces.Unresolved e) {
                    err.println(e.getMessage());
                    return ExitCodes.USAGE;
                } catch (TracedBoot.SetupRejected e) {
                    err.println(e.rejected().getMessage());
                    e.rejected().details().forEach(err::println);
                    return ExitCodes.USAGE;
                } catch (KernelImageException e) {
                    err.println("kpemu: " + e.getMessage());
                    return ExitCodes.ERROR;
                } catch (dev.kpemu.machine.snapshot.SnapshotException e) {
                    err.println("kpemu: " + e.getMessage());
                    return ExitCodes.SNAPSHOT_REFUSED;
                }
                if (term != null) {
                    term.close();
                    term = null;
                }
                if (textTrace != null) textTrace.close();
                if (trace != null) trace.flush();
                if (jsonTrace != null) jsonTrace.close();
                if (traced != null && traced.rejectedAtRegistration() != null) {
                    var e = traced.rejectedAtRegistration();
                    err.println(e.logged() ? e.errorLog() : "kpemu: definition rejected at registration (" + e.errno() + "): " + e.getMessage());
                    return ExitCodes.USAGE;
                }
                if (traced != null) printTables(tables, err, traced, setup);
                tables.flush();
                out.flush();
                int code = ExitCodes.of(r.outcome());
                boolean hostStopped = r.stop() instanceof StopReason.HostRequest;
                if (hostStopped && signals.caught() != null) {
                    code = signals.exitCode();
                    err.printf("kpemu: stopped by %s at guest %.3f s (exit %d)%n", signals.caught(), r.guestNanos() / 1e9, code);
                } else if (hostStopped) {
                    code = ExitCodes.OK;     // Ctrl-A x, or the end of replayed input
                    err.printf("kpemu: %s at guest %.3f s%n", r.status(), r.guestNanos() / 1e9);
                } else if (gc.commandGuest() && r.outcome() == BootOutcome.POWERED_OFF && r.commandExit() != null) {
                    code = r.commandExit();
                } else if (gc.commandGuest() && r.outcome() == BootOutcome.POWERED_OFF && noTerminal(r.lastLines()) != null) {
                    code = ExitCodes.ERROR;
                    err.println("kpemu: the command could not run: " + noTerminal(r.lastLines()));
                } else {
                    if (gc.commandGuest() && r.outcome() == BootOutcome.POWERED_OFF) {
                        code = ExitCodes.ERROR;
                        err.println("kpemu: the guest powered off without reporting the command's exit status");
                    }
                    err.printf("kpemu: %s (exit %d); guest %.3f s, %d instructions, %d interrupts; host %.2f s",
                            r.status(), ExitCodes.of(r.outcome()), r.guestNanos() / 1e9, r.instructions(), r.interrupts(), r.hostNanos() / 1e9);
                    if (r.initDoneHostNanos() >= 0) err.printf("; init marker at host %.2f s", r.initDoneHostNanos() / 1e9);
                    err.println();
                    if (dev.kpemu.boot.PhaseLog.on() && traced != null && traced.kprobes() != null) {
                        var k = traced.kprobes();
                        err.printf("kpemu: hits recorded natively %d (lines formatted %d, passed as text %d), kretprobe entries %d, returns %d (lines passed %d)%n",
                                k.recordedHits(), k.recordedLines(), k.passedLines(), k.recordedReturnEntries(), k.recordedReturns(), k.passedReturnLines());
                    }
                    if (code != ExitCodes.OK) {
                        err.printf("kpemu: pc 0x%x %s%n", r.pc(), r.symbol());
                        err.println("kpemu: last console lines:");
                        for (String l : r.lastLines()) err.println("  " + l);
                    }
                }
                if (outputs != null) {
                    StreamedOutputs.Finished f;
                    try {
                        f = outputs.finish(header(traced, a, version, kernelFile, initrdFile), r.outcome() == BootOutcome.POWERED_OFF && !hostStopped);
                    } catch (RecordedTrace.MalformedTraceException e) {
                        err.println("kpemu: " + e.getMessage());
                        return ExitCodes.ERROR;
                    }
                    if (f.recorded() != null)
                        err.printf("kpemu: recorded %d events to %s%s%n", f.recorded(), record,
                                r.outcome() == BootOutcome.POWERED_OFF ? "" : " (the guest did not power off: do not use it as a golden)");
                    if (f.perfetto() != null) {
                        if ("-".equals(perfetto)) out.flush();
                        var c = f.perfetto();
                        err.printf("kpemu: perfetto JSON%s: %d task tracks, %d instants, %d slices, %d phases%n",
                                "-".equals(perfetto) ? "" : " " + perfetto, c.tracks(), c.instants(), c.slices(), c.phases());
                    }
                    if (f.comparison() != null) {
                        err.print(f.comparison().diff());
                        if (!f.comparison().matches()) code = ExitCodes.TRACE_DIFFERS;
                    }
                }
                err.flush();
                return code;
            }
        } finally {
            if (textTrace != null) textTrace.close();
            if (term != null) term.close();
            if (recorder != null) recorder.close();
            if (commandOut != null && commandOut != messages) commandOut.flush();
            if (commandOut instanceof java.io.BufferedOutputStream b) b.close();
            if (con != null && con != System.err) con.close();
            else System.err.flush();
            if (generated != null) {
                Files.deleteIfExists(generated);
                Files.deleteIfExists(generated.getParent());
            }
            if (traceFile != null) traceFile.close();
            if (outputs != null) outputs.close();
            if (perfettoFile != null) perfettoFile.close();
        }
    }

    /** The header of this boot's recorded trace (the phases once the guest stopped). */
    private RecordedTrace.Header header(TracedBoot traced, Arch a, Map<String, String> version, Path kernelFile, Path initrdFile) throws IOException {
        return traced.header(a, version.get("package"), version.get("version"), kernelFile, initrdFile,
                VersionProvider.kpemuVersion(), eventsFile != null && events.isEmpty() ? eventsFile.getFileName().toString() : null);
    }

    /** A file kpemu writes; one that cannot be opened is a usage error naming it (one line, exit 2). */
    private OutputStream openForWriting(Path file) {
        try {
            return new FileOutputStream(file.toFile());
        } catch (java.io.FileNotFoundException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "cannot write " + file + ": " + e.getMessage().replace(file + " ", "").replaceAll("^\\((.*)\\)$", "$1"));
        }
    }

    /** What /init said when the command's terminal device was missing, or null. */
    static String noTerminal(List<String> consoleLines) {
        for (String l : consoleLines) {
            int i = l.indexOf(dev.kpemu.image.CommandGuest.NO_TERMINAL + " ");
            if (i >= 0) return l.substring(i + dev.kpemu.image.CommandGuest.NO_TERMINAL.length() + 1);
        }
        return null;
    }

    /** What the positional command, -i, --input, --command-output and --record-input ask for, checked together. */
    record GuestCommandOptions(boolean commandGuest, boolean session) {}

    private GuestCommandOptions guestCommandOptions() {
        boolean session = interactive || input != null;
        boolean commandGuest = !command.isEmpty() || session;
        if (initrd != null && (commandGuest || !add.isEmpty()))
            throw new CommandLine.ParameterException(spec.commandLine(), "--initrd cannot be combined with a command, -i, --input or --add (they build the initramfs)");
        if (interactive && input != null) throw new CommandLine.ParameterException(spec.commandLine(), "-i and --input exclude each other");
        if (recordInput != null && !interactive) throw new CommandLine.ParameterException(spec.commandLine(), "--record-input needs -i");
        if (commandOutput != null && (!commandGuest || interactive))
            throw new CommandLine.ParameterException(spec.commandLine(), "--command-output needs a command after -- (or --input), and not -i (the terminal is the output)");
        return new GuestCommandOptions(commandGuest, session);
    }

    /** One line: what the jump displaces, or every rule that refused. */
    static String describe(dev.kpemu.optprobes.Verdict v) {
        return switch (v) {
            case dev.kpemu.optprobes.Verdict.Optimizable o -> "optimizable, the jump displaces " + o.region().length() + " bytes: "
                    + o.region().instructions().stream().map(dev.kpemu.decoder.Instruction::text).collect(java.util.stream.Collectors.joining("; "));
            case dev.kpemu.optprobes.Verdict.Refused r -> "refused: " + r.refusals().stream().map(Object::toString)
                    .collect(java.util.stream.Collectors.joining("; "));
        };
    }

    private void printTables(PrintWriter out, PrintWriter err, TracedBoot traced, EventSetup setup) {
        var ev = traced.events();
        if (ev == null) {
            err.println("kpemu: the guest never reached " + traced.armedAt() + "; no probe was registered");
            return;
        }
        java.util.Set<String> histEvents = new java.util.LinkedHashSet<>();
        for (EventSetup.Trigger t : setup.triggers()) if (!dev.kpemu.kprobes.events.WprobeTrigger.isOne(t.text())) histEvents.add(t.event());
        for (String name : histEvents) {
            out.println("kpemu: events/" + (name.contains("/") ? name : ev.events().stream()
                    .filter(k -> k.endsWith("/" + name)).findFirst().orElse(name)) + "/hist");
            out.print(ev.hist(name));
        }
        var uprobes = traced.uprobeEvents();
        if (profile) {
            out.println("kpemu: kprobe_profile");
            out.print(ev.profile());
            if (uprobes != null) {
                out.println("kpemu: uprobe_profile");
                uprobes.profile().forEach(out::println);
            }
        }
        if (list) {
            out.println("kpemu: kprobe_events");
            out.print(ev.listing());
            if (uprobes != null) {
                out.println("kpemu: uprobe_events");
                uprobes.probes().forEach(u -> out.println(u.listing()));
                traced.uprobeSymbolPlaces().forEach(p -> out.println("kpemu: " + p + " (PATH:SYMBOL, kpemu's extension: Linux's uprobe_events takes only offsets)"));
            }
            out.println("kpemu: kprobes/list");
            out.print(traced.kprobes().list());
            if (traced.optimizer() != null) {
                out.println("kpemu: jump optimization: " + traced.optimizer().jumpsWritten() + " jumps written; " + traced.optimizationInputs());
                traced.optimizer().verdicts().forEach((addr, v) -> out.printf("  %016x %s%n", addr, describe(v)));
            }
        }
        if (formats) {
            ev.formats().forEach((name, text) -> {
                out.println("kpemu: format of " + name);
                out.print(text);
            });
        }
    }

    private List<String> definitions() throws IOException {
        List<String> defs = new ArrayList<>(events);
        if (eventsFile != null) {
            try {
                defs.addAll(Files.readAllLines(eventsFile));
            } catch (NoSuchFileException e) {
                throw new CommandLine.ParameterException(spec.commandLine(), "no such file: " + eventsFile);
            }
        }
        defs.removeIf(l -> l.isBlank() || l.strip().startsWith("#"));
        return defs;
    }
}
