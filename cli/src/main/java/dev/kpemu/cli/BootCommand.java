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

import dev.kpemu.boot.BootHooks;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.kprobes.events.RecordedTrace;
import dev.kpemu.kprobes.events.RecordedTraceReader;
import dev.kpemu.kprobes.events.TraceComparison;
import dev.kpemu.machine.Arch;

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
        footer = {"", "Exit codes: 0 the guest powered off (and, with --expect, the trace equals the golden), 1 error,",
                "2 usage or probe-definition error, 3 guest panic or unhandled guest fault, 4 timeout,",
                "5 the trace differs from --expect's golden (the diff is on stderr)."})
final class BootCommand implements Callable<Integer> {
    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Option(names = "--arch", required = true, paramLabel = "ARCH", description = "x86_64 or arm64")
    String arch;

    @Option(names = "--kernel", paramLabel = KernelOption.LABEL,
            description = "kernel to boot: an image file (x86_64: bzImage or vmlinux; arm64: Image, as Debian's vmlinuz), or " + KernelOption.HELP)
    String kernel;

    @Option(names = "--initrd", paramLabel = "FILE", description = "initramfs (default: kpemu's busybox guest)")
    Path initrd;

    @Option(names = "--append", paramLabel = "ARGS", description = "kernel command line (default: the arch's console and nokaslr)")
    String append;

    @Option(names = "--memory", paramLabel = "MiB", defaultValue = "256", description = "guest RAM (default ${DEFAULT-VALUE})")
    int memoryMiB;

    @Option(names = "--timeout", paramLabel = "SECONDS", defaultValue = "60", description = "limit in guest seconds (default ${DEFAULT-VALUE})")
    double timeoutSeconds;

    @Option(names = "--console", paramLabel = "FILE|-", defaultValue = "-", description = "guest console: a file, or - for stderr (default)")
    String console;

    @Option(names = {"-e", "--event"}, paramLabel = "DEF", description = "a kprobe_events definition (repeatable), e.g. 'p:myopen do_sys_openat2 dfd=%%di'")
    List<String> events = new ArrayList<>();

    @Option(names = "--events-file", paramLabel = "FILE", description = "definitions, one per line as written to kprobe_events")
    Path eventsFile;

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

    @Option(names = "--perfetto", paramLabel = "FILE|-",
            description = "write the trace as Chrome/Perfetto trace-event JSON (ui.perfetto.dev, chrome://tracing); - writes it to stdout instead of the text trace")
    String perfetto;

    @Override public Integer call() throws IOException {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        Arch a = ArchOption.one(spec, arch);
        dev.kpemu.image.KernelChoice choice = KernelOption.parse(spec, kernel);
        if (memoryMiB < 64) throw new CommandLine.ParameterException(spec.commandLine(), "--memory must be at least 64 MiB");
        if (timeoutSeconds <= 0) throw new CommandLine.ParameterException(spec.commandLine(), "--timeout must be positive");
        List<String> defs = definitions();
        TraceComparison.Choice choice2 = CompareCommand.choice(spec, mode);
        if ((record != null || expect != null || perfetto != null) && defs.isEmpty())
            throw new CommandLine.ParameterException(spec.commandLine(), "--record, --expect and --perfetto need probe definitions (-e or --events-file)");
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
        PrintStream trace = "-".equals(perfetto) ? null : WriterOutputStream.printStream(out);
        PrintStream messages = WriterOutputStream.printStream(err);
        TracedBoot traced = defs.isEmpty() ? null : new TracedBoot(defs, trace).keepRecords(false);
        if (traced != null && optimize != null) traced.optimize(optimize);
        if (traced != null) traced.armAtInit(fromInit).allowUnsafe(allowUnsafe).kernelMessages(line -> { err.println(line); err.flush(); });
        OutputStream con = "-".equals(console) ? System.err : new FileOutputStream(console);
        StreamedOutputs outputs = null;
        OutputStream perfettoFile = null;
        try {
            BootRunner.Result r;
            Path kernelFile, initrdFile;
            Map<String, String> version = Map.of();
            try {
                kernelFile = KernelOption.file(choice, a);
                initrdFile = initrd != null ? initrd : dev.kpemu.image.GuestImages.forRepository().initramfs(a);
                if (choice instanceof dev.kpemu.image.KernelChoice.Debian d && (record != null || expect != null || perfetto != null))
                    version = dev.kpemu.image.GuestImages.forRepository().kernelVersion(a, d);
                if (traced != null && (record != null || expect != null || perfetto != null)) {
                    OutputStream json = perfetto == null ? null : "-".equals(perfetto) ? WriterOutputStream.printStream(out)
                            : (perfettoFile = Files.newOutputStream(Path.of(perfetto)));
                    Map<String, String> v = version;
                    outputs = new StreamedOutputs(a, traced.headerDefinitions(), record, json,
                            expect == null ? null : RecordedTraceReader.open(expect), choice2, () -> header(traced, a, v, kernelFile, initrdFile));
                    traced.sink(outputs);
                }
                try (Progress p = Progress.start("kpemu", "-".equals(console),
                        () -> traced == null ? -1 : traced.guestNanos(), () -> traced == null ? 0 : traced.eventCount())) {
                    r = BootRunner.boot(new BootRunner.Options(a, kernelFile, initrdFile, append, memoryMiB, timeoutSeconds, con, messages),
                            traced == null ? BootHooks.NONE : traced);
                }
            } catch (TracedBoot.DefinitionRejected e) {
                e.kernelMessages().forEach(err::println);
                err.println(e.error().logged() ? e.error().errorLog() : "kpemu: definition rejected (" + e.error().errno() + ")");
                return ExitCodes.USAGE;
            } catch (KernelImageException e) {
                err.println("kpemu: " + e.getMessage());
                return ExitCodes.ERROR;
            }
            if (trace != null) trace.flush();
            if (traced != null && traced.rejectedAtRegistration() != null) {
                var e = traced.rejectedAtRegistration();
                err.println(e.logged() ? e.errorLog() : "kpemu: definition rejected at registration (" + e.errno() + ")");
                return ExitCodes.USAGE;
            }
            if (traced != null) printTables(out, traced);
            out.flush();
            err.printf("kpemu: %s (exit %d); guest %.3f s, %d instructions, %d interrupts; host %.2f s",
                    r.status(), r.exitCode(), r.guestNanos() / 1e9, r.instructions(), r.interrupts(), r.hostNanos() / 1e9);
            if (r.initDoneHostNanos() >= 0) err.printf("; init marker at host %.2f s", r.initDoneHostNanos() / 1e9);
            err.println();
            if (r.exitCode() != ExitCodes.OK) {
                err.printf("kpemu: pc 0x%x %s%n", r.pc(), r.symbol());
                err.println("kpemu: last console lines:");
                for (String l : r.lastLines()) err.println("  " + l);
            }
            int code = r.exitCode();
            if (outputs != null) {
                StreamedOutputs.Finished f;
                try {
                    f = outputs.finish(header(traced, a, version, kernelFile, initrdFile), code == ExitCodes.OK);
                } catch (RecordedTrace.MalformedTraceException e) {
                    err.println("kpemu: " + e.getMessage());
                    return ExitCodes.ERROR;
                }
                if (f.recorded() != null)
                    err.printf("kpemu: recorded %d events to %s%s%n", f.recorded(), record,
                            r.exitCode() == ExitCodes.OK ? "" : " (the guest did not power off: do not use it as a golden)");
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
        } finally {
            try {
                if (outputs != null) outputs.close();
                if (perfettoFile != null) perfettoFile.close();
            } finally {
                if (con != System.err) con.close();
                else System.err.flush();
            }
        }
    }

    /** The header of this boot's recorded trace (the phases once the guest stopped). */
    private RecordedTrace.Header header(TracedBoot traced, Arch a, Map<String, String> version, Path kernelFile, Path initrdFile) throws IOException {
        return traced.header(a, version.get("package"), version.get("version"), kernelFile, initrdFile,
                VersionProvider.kpemuVersion(), eventsFile != null && events.isEmpty() ? eventsFile.getFileName().toString() : null);
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

    private void printTables(PrintWriter out, TracedBoot traced) {
        var ev = traced.events();
        if (ev == null) {
            out.println("kpemu: the guest never reached " + traced.armedAt() + "; no probe was registered");
            return;
        }
        if (profile) {
            out.println("kpemu: kprobe_profile");
            out.print(ev.profile());
        }
        if (list) {
            out.println("kpemu: kprobe_events");
            out.print(ev.listing());
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
