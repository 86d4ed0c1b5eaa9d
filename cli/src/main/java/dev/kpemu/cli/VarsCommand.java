package dev.kpemu.cli;

import java.io.PrintWriter;
import java.util.Optional;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.btf.Btf;
import dev.kpemu.image.btf.BtfLocator;
import dev.kpemu.kprobes.events.FunctionVariables;
import dev.kpemu.machine.Arch;

/**
 * {@code kpemu vars FUNC}: a function's parameters from the kernel's own BTF, with their C types,
 * what each fetches as untyped, its {@code $argN} and entry register, and {@code $retval}.
 */
@Command(name = "vars", mixinStandardHelpOptions = true,
        description = {"Show what a probe on FUNC can fetch by name, from the kernel's BTF (as perf probe --vars):",
                "the prototype, then per parameter: name, C type, fetch type when untyped, $argN, entry register,",
                "and other ways to fetch it; last $retval for return probes. Parameter names, $arg* and ->member",
                "need a kernel with BTF arguments (6.10 and later); 6.1 takes $argN and registers only."})
final class VarsCommand implements Callable<Integer> {
    @Option(names = "--arch", defaultValue = "x86_64", description = "x86_64 or arm64 (default ${DEFAULT-VALUE})")
    String arch;

    @Option(names = "--kernel", paramLabel = KernelOption.LABEL,
            description = "the kernel: a file (vmlinuz, Image or vmlinux), or " + KernelOption.HELP)
    String kernel;

    @Parameters(paramLabel = "FUNC", description = "a kernel function")
    String function;

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Override public Integer call() throws KernelImageException, java.io.IOException {
        Arch a = ArchOption.one(spec, arch);
        KernelChoice choice = KernelOption.parse(spec, kernel);
        // x86: the vmlinux the cache keeps next to a Debian bzImage reads without decompressing
        java.nio.file.Path file = choice instanceof KernelChoice.Debian d && a == Arch.X86_64
                ? GuestImages.forRepository().vmlinux(a, d) : KernelOption.file(choice, a);
        Optional<FunctionVariables.Signature> sig = new DiscoveryIndex(GuestImages.forRepository().cacheRoot(), file, a).variables(function, () -> {
            spec.commandLine().getErr().println("kpemu: indexing the kernel's BTF functions (once per kernel file)...");
            try {
                Btf btf = BtfLocator.read(file).btf();
                return FunctionVariables.all(btf, a).toList();
            } catch (KernelImageException e) {
                throw new IllegalStateException(e.getMessage(), e);
            }
        });
        if (sig.isEmpty()) {
            spec.commandLine().getErr().println("kpemu: the kernel's BTF has no function '" + function + "'");
            return ExitCodes.USAGE;
        }
        PrintWriter out = spec.commandLine().getOut();
        out.println(sig.get().prototype());
        for (FunctionVariables.Variable v : sig.get().variables()) {
            out.println(String.join("\t", v.name(), v.cType(), v.fetchType() == null ? "-" : v.fetchType(),
                    v.argument() == null ? "-" : v.argument(), v.register(), v.also()).stripTrailing());
        }
        out.flush();
        return ExitCodes.OK;
    }
}
