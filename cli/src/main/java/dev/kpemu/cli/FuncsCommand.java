package dev.kpemu.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.kprobes.events.KallsymsSymbols;
import dev.kpemu.kprobes.events.KernelProbeSites;
import dev.kpemu.kprobes.events.ProbeGlob;
import dev.kpemu.kprobes.events.ProbeableFunctions;
import dev.kpemu.kprobes.events.UprobeSymbolPlaces;
import dev.kpemu.machine.Arch;

/**
 * {@code kpemu funcs [GLOB]}: the kernel functions a kprobe event can be put on, one per line, the
 * ones Linux refuses marked with its reason; decided from the kernel file, without booting it.
 */
@Command(name = "funcs", mixinStandardHelpOptions = true,
        description = {"List the kernel's functions that match GLOB (default: all), as perf probe --funcs and bpftrace -l do.",
                "A function Linux refuses a kprobe on (notrace, blacklisted, a reserved site, ...) is followed by a tab",
                "and 'refused: REASON'. With --binary PATH: a program's functions and their file offsets (uprobe places).",
                "Exit 2 when nothing matches."})
final class FuncsCommand implements Callable<Integer> {
    @Option(names = "--arch", defaultValue = "x86_64", description = "x86_64 or arm64 (default ${DEFAULT-VALUE})")
    String arch;

    @Option(names = "--kernel", paramLabel = KernelOption.LABEL,
            description = "the kernel: a file (vmlinuz, Image or vmlinux), or " + KernelOption.HELP)
    String kernel;

    @Option(names = "--probeable", description = "list only the functions Linux takes a kprobe on")
    boolean probeableOnly;

    @Option(names = "--error-injectable", description = "list the functions --fail may fail, as 'FUNCTION ETYPE' (the kernel's error-injection list)")
    boolean errorInjectable;

    @Option(names = "--binary", paramLabel = "PATH",
            description = "list a program's or library's functions instead (its ELF .symtab/.dynsym), as 'NAME<TAB>0xOFFSET': the places of uprobe definitions PATH:0xOFFSET or PATH:NAME")
    Path binary;

    @Parameters(arity = "0..1", paramLabel = "GLOB", description = "a shell glob over function names (*, ?, [...]), or a name")
    String glob = "*";

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    private int printErrorInjectable(Arch a, KernelChoice choice) throws java.io.IOException {
        java.util.regex.Pattern p;
        try {
            p = ProbeGlob.pattern(glob);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "bad glob '" + glob + "': " + e.getMessage());
        }
        var list = ErrorInjectionCheck.listFor(choice, a);
        if (list.isEmpty()) {
            spec.commandLine().getErr().println("kpemu: no error-injection list is known for this kernel (recorded for Debian's 6.1, 6.12 and 7.2 series)");
            return ExitCodes.USAGE;
        }
        PrintWriter out = spec.commandLine().getOut();
        list.get().all().forEach((f, t) -> { if (p.matcher(f).matches()) out.println(f + " " + t); });
        out.flush();
        return ExitCodes.OK;
    }

    /** {@code --binary}: the ELF file's functions with their file offsets, by name. */
    private int printBinaryFunctions() {
        java.util.regex.Pattern p;
        try {
            p = ProbeGlob.pattern(glob);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "bad glob '" + glob + "': " + e.getMessage());
        }
        byte[] bytes;
        try {
            bytes = java.nio.file.Files.readAllBytes(binary);
        } catch (java.io.IOException e) {
            spec.commandLine().getErr().println("kpemu: cannot read " + binary + ": " + e.getMessage());
            return ExitCodes.USAGE;
        }
        List<UprobeSymbolPlaces.Function> fs;
        try {
            fs = UprobeSymbolPlaces.functions(binary.toString(), bytes);
        } catch (UprobeSymbolPlaces.Unresolved e) {
            spec.commandLine().getErr().println(e.getMessage());
            return ExitCodes.USAGE;
        }
        PrintWriter out = spec.commandLine().getOut();
        List<UprobeSymbolPlaces.Function> matched = fs.stream().filter(f -> p.matcher(f.name()).matches())
                .sorted(java.util.Comparator.comparing(UprobeSymbolPlaces.Function::name)).toList();
        matched.forEach(f -> out.println(f.name() + "\t0x" + Long.toHexString(f.fileOffset())));
        out.flush();
        if (matched.isEmpty()) {
            spec.commandLine().getErr().println("kpemu: no function of " + binary + " matches '" + glob + "'");
            return ExitCodes.USAGE;
        }
        return ExitCodes.OK;
    }

    @Override public Integer call() throws KernelImageException, java.io.IOException {
        Arch a = ArchOption.one(spec, arch);
        KernelChoice choice = KernelOption.parse(spec, kernel);
        if (errorInjectable) return printErrorInjectable(a, choice);
        if (binary != null) return printBinaryFunctions();
        // x86: the vmlinux the cache keeps next to a Debian bzImage reads without decompressing
        Path k = choice instanceof KernelChoice.Debian d && a == Arch.X86_64
                ? GuestImages.forRepository().vmlinux(a, d) : KernelOption.file(choice, a);
        try {
            ProbeGlob.pattern(glob);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "bad glob '" + glob + "': " + e.getMessage());
        }
        List<ProbeableFunctions.Function> fs = new DiscoveryIndex(GuestImages.forRepository().cacheRoot(), k, a).functions(glob, () -> {
            spec.commandLine().getErr().println("kpemu: indexing the kernel's functions (once per kernel file)...");
            try {
                Kallsyms.KernelText kt = Kallsyms.load(k);
                try (KernelProbeSites sites = new KernelProbeSites(a, kt.symbols(), kt.bytes())) {
                    return ProbeableFunctions.list(a, kt.symbols(), KallsymsSymbols.forKernel(kt.symbols(), a, kt.bytes()), sites, "*");
                }
            } catch (KernelImageException e) {
                throw new IllegalStateException(e.getMessage(), e);
            }
        });
        PrintWriter out = spec.commandLine().getOut();
        for (ProbeableFunctions.Function f : fs) {
            if (f.probeable()) out.println(f.name());
            else if (!probeableOnly) out.println(f.name() + "\trefused: " + f.refusal());
        }
        out.flush();
        if (fs.isEmpty()) {
            spec.commandLine().getErr().println("kpemu: no function matches '" + glob + "'");
            return ExitCodes.USAGE;
        }
        return ExitCodes.OK;
    }
}
