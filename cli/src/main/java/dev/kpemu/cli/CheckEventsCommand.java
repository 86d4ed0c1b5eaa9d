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
import dev.kpemu.image.KernelRelease;
import dev.kpemu.image.btf.BtfLocator;
import dev.kpemu.kprobes.events.DefinitionCheck;
import dev.kpemu.kprobes.events.Dialect;
import dev.kpemu.kprobes.events.KallsymsSymbols;
import dev.kpemu.kprobes.events.KernelProbeSites;
import dev.kpemu.kprobes.events.KernelSymbols;
import dev.kpemu.kprobes.events.ProbeGlob;
import dev.kpemu.kprobes.events.ProbeSites;
import dev.kpemu.kprobes.events.ProbeSyntaxException;
import dev.kpemu.machine.Arch;
import dev.kpemu.session.TracedBoot;

/**
 * {@code kpemu check-events}: validates kprobe_events definitions against a kernel's symbols
 * without booting it. Errors are printed as the kernel's {@code error_log} prints them.
 */
@Command(name = "check-events", mixinStandardHelpOptions = true,
        description = {"Check kprobe_events definitions against a kernel without booting it.",
                "Valid definitions are printed as kprobe_events lists them; errors as the kernel's",
                "error_log shows them (message, command, caret), with exit code 2.",
                "A glob in the probed symbol (kpemu's extension, as kpemu boot: p:vfs/ vfs_*) lists every match",
                "Linux would accept and skips the others with one summary line."})
final class CheckEventsCommand implements Callable<Integer> {
    @Option(names = "--arch", defaultValue = "x86_64", description = "x86_64 or arm64 (default ${DEFAULT-VALUE})")
    String arch;

    @Option(names = "--kernel", paramLabel = KernelOption.LABEL,
            description = "kernel whose kallsyms to check against: a file (vmlinuz, Image or vmlinux), or " + KernelOption.HELP)
    String kernel;

    @Option(names = "--dialect", paramLabel = DialectOption.LABEL, description = DialectOption.HELP)
    String dialect;

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
        PrintWriter out = spec.commandLine().getOut(), err = spec.commandLine().getErr();
        int bad = 0;
        try (Checker c = checker(a, choice, DialectOption.parse(spec, dialect))) {
            for (String line : lines) {
                if (ProbeGlob.isGlob(line)) {
                    if (!checkGlob(line, c, out, err)) bad++;
                    continue;
                }
                DefinitionCheck.Outcome o = c.check().check(line);
                o.console().forEach(err::println);
                if (o.note() != null) err.println("kpemu: " + o.note());
                if (o.accepted()) {
                    o.listing().forEach(out::println);
                    continue;
                }
                bad++;
                ProbeSyntaxException e = o.error();
                err.println(e.logged() ? e.errorLog() : "kpemu: rejected with " + e.errno() + " (the kernel logs no message): " + line);
            }
        }
        out.flush();
        err.flush();
        return bad == 0 ? ExitCodes.OK : ExitCodes.USAGE;
    }

    /**
     * A glob definition (kpemu's extension, {@link ProbeGlob}) expanded as {@code kpemu boot}
     * expands it: each match checked as a single definition; the accepted ones listed, the ones
     * Linux refuses skipped with one summary line on stderr. False when nothing matches, only
     * refused functions do, or the glob is malformed (each with a one-line reason).
     */
    private boolean checkGlob(String line, Checker c, PrintWriter out, PrintWriter err) {
        if (c.symbols() == null) {
            err.println("kpemu: " + line.strip() + ": a glob needs the kernel's symbols (not with --syntax-only)");
            return false;
        }
        List<ProbeGlob.Symbol> all = new ArrayList<>(c.symbols().symbols().size());
        for (var sym : c.symbols().symbols())
            all.add(new ProbeGlob.Symbol(sym.name(), sym.type() == 't' || sym.type() == 'T' || sym.type() == 'W' || sym.type() == 'w'));
        ProbeGlob.Expansion x;
        try {
            x = ProbeGlob.expand(line, all);
        } catch (IllegalArgumentException e) {
            err.println("kpemu: " + e.getMessage());
            return false;
        }
        int accepted = 0;
        java.util.Map<String, Integer> reasons = new java.util.TreeMap<>();
        for (String d : x.definitions()) {
            DefinitionCheck.Outcome o = c.check().check(d);
            if (o.accepted()) {
                accepted++;
                o.listing().forEach(out::println);
            } else {
                reasons.merge(TracedBoot.reason(o.error(), o.console()), 1, Integer::sum);
            }
        }
        err.println(TracedBoot.globSummary(line, accepted, x.definitions().size() - accepted, reasons));
        if (accepted > 0) return true;
        err.println("kpemu: " + line.strip() + ": " + (x.matched().isEmpty() ? "no function matches" : "Linux refuses every match"));
        return false;
    }

    /** The check, the kernel's symbols (null: syntax only) and what it holds open (the kernel's decoder). */
    private record Checker(DefinitionCheck check, dev.kpemu.image.SymbolTable symbols, AutoCloseable resource) implements AutoCloseable {
        @Override public void close() {
            try {
                resource.close();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }

    /**
     * Syntax only: every symbol accepted, no probe-point check. Otherwise the kernel's kallsyms and
     * the probe points as Linux checks them after boot ({@link KernelProbeSites}), from its file, in
     * the kernel's own dialect (from its release) with its BTF, unless {@code forced}.
     */
    private Checker checker(Arch a, KernelChoice choice, Dialect forced) throws KernelImageException {
        if (syntaxOnly) {
            Dialect d = forced != null ? forced : Dialect.LINUX_6_1;
            return new Checker(new DefinitionCheck(a, d, KernelSymbols.permissive(), ProbeSites.none()), null, () -> { });
        }
        Path k = GuestImages.forRepository().kernel(a, choice);
        Kallsyms.KernelText kt = Kallsyms.load(k);
        Dialect d = forced != null ? forced : Dialect.forRelease(KernelRelease.of(kt.bytes()).orElse(null));
        KallsymsSymbols symbols = KallsymsSymbols.forKernel(kt.symbols(), a, kt.bytes());
        if (d.hasBtfArgs()) symbols = symbols.withBtf(BtfLocator.read(k).btf());
        KernelProbeSites sites = new KernelProbeSites(a, kt.symbols(), kt.bytes()).dialect(d);
        return new Checker(new DefinitionCheck(a, d, symbols, sites), kt.symbols(), sites);
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
