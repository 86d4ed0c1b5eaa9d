package dev.kpemu.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.kprobes.events.CompiledProbe;
import dev.kpemu.kprobes.events.Dialect;
import dev.kpemu.kprobes.events.KallsymsSymbols;
import dev.kpemu.kprobes.events.KernelSymbols;
import dev.kpemu.kprobes.events.ProbeDefinition;
import dev.kpemu.kprobes.events.ProbeParser;
import dev.kpemu.kprobes.events.ProbeSyntaxException;
import dev.kpemu.kprobes.events.TraceFormatter;
import dev.kpemu.kprobes.events.TraceProbe;
import dev.kpemu.machine.Arch;

/**
 * {@code kpemu check-events}: validates kprobe_events definitions against a kernel's symbols
 * without booting it. Errors are printed as the kernel's {@code error_log} prints them.
 */
@Command(name = "check-events", mixinStandardHelpOptions = true,
        description = {"Check kprobe_events definitions against a kernel without booting it.",
                "Valid definitions are printed as kprobe_events lists them; errors as the kernel's",
                "error_log shows them (message, command, caret), with exit code 2."})
final class CheckEventsCommand implements Callable<Integer> {
    @Option(names = "--arch", defaultValue = "x86_64", description = "x86_64 or arm64 (default ${DEFAULT-VALUE})")
    String arch;

    @Option(names = "--kernel", paramLabel = KernelOption.LABEL,
            description = "kernel whose kallsyms to check against: a file (vmlinuz, Image or vmlinux), or " + KernelOption.HELP)
    String kernel;

    @Option(names = "--syntax-only", description = "check the syntax only: accept every symbol name")
    boolean syntaxOnly;

    @Option(names = {"-e", "--event"}, paramLabel = "DEF", description = "a definition, as written to kprobe_events (repeatable)")
    List<String> definitions = new ArrayList<>();

    @Parameters(arity = "0..1", paramLabel = "FILE", description = "a file of definitions, one per line ('-' for standard input)")
    String file;

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Override public Integer call() throws IOException {
        Arch a = ArchOption.one(spec, arch);
        KernelChoice choice = KernelOption.parse(spec, kernel);
        List<String> lines = new ArrayList<>(definitions);
        if (file != null) lines.addAll(readLines(file));
        if (lines.isEmpty()) throw new CommandLine.ParameterException(spec.commandLine(), "no definitions: give -e DEF or a FILE");
        KernelSymbols symbols = syntaxOnly ? KernelSymbols.permissive() : kernelSymbols(a, choice);
        ProbeParser parser = new ProbeParser(a, Dialect.LINUX_6_1, symbols);
        PrintWriter out = spec.commandLine().getOut(), err = spec.commandLine().getErr();
        int bad = 0;
        for (String line : lines) {
            try {
                ProbeDefinition d = parser.parse(line);
                if (d instanceof TraceProbe p) {
                    if (!syntaxOnly) CompiledProbe.compile(p, a, symbols);
                    out.println(TraceFormatter.listing(p));
                }
            } catch (ProbeSyntaxException e) {
                bad++;
                err.println(e.logged() ? e.errorLog() : "kpemu: rejected with " + e.errno() + " (the kernel logs no message): " + line);
            }
        }
        out.flush();
        err.flush();
        return bad == 0 ? ExitCodes.OK : ExitCodes.USAGE;
    }

    private KernelSymbols kernelSymbols(Arch a, KernelChoice choice) throws KernelImageException {
        GuestImages images = GuestImages.forRepository();
        Path k = images.kernel(a, choice);
        // A Debian kernel's config says whether functions start with endbr64 (probes at +4); a file has none here.
        boolean ibt = a == Arch.X86_64 && choice instanceof KernelChoice.Debian d && configHas(images.config(a, d), "CONFIG_X86_KERNEL_IBT=y");
        return new KallsymsSymbols(Kallsyms.read(k), ibt ? 4 : 0);
    }

    private static boolean configHas(Path config, String line) {
        try {
            return Files.readAllLines(config).contains(line);
        } catch (IOException e) {
            return false;
        }
    }

    private List<String> readLines(String f) throws IOException {
        if (f.equals("-")) return new String(System.in.readAllBytes(), StandardCharsets.UTF_8).lines().toList();
        try {
            return Files.readAllLines(Path.of(f));
        } catch (NoSuchFileException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "no such file: " + f);
        }
    }
}
