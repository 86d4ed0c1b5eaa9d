package dev.kpemu.cli;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;

/** {@code kpemu fuzz}: the differential tester against Linux's own kprobe_events under QEMU ({@link Fuzzer}). */
@Command(name = "fuzz", mixinStandardHelpOptions = true,
        description = {"Random sets of probe definitions, each answered by Linux's own kprobe_events under QEMU and by kpemu on the same kernel "
                + "and guest; every difference classified (kpemu defect, machine-dependent, Linux's own flakiness, left-out class) "
                + "with a minimal reproduction per class in --out. Exit 0 when no kpemu defect was found, 5 when one was."})
final class FuzzCommand implements Callable<Integer> {
    @Option(names = "--arch", required = true, paramLabel = "ARCH", description = "x86_64 or arm64") String arch;
    @Option(names = "--kernel", required = true, paramLabel = KernelOption.LABEL,
            description = "the kernel both machines boot (its function survey must be recorded: guest-images/record-corpus.sh); " + KernelOption.HELP) String kernel;
    @Option(names = "--seed", required = true, paramLabel = "S", description = "the run's seed: the same seed, the same sets") long seed;
    @Option(names = "--seconds", paramLabel = "N", description = "start no set after N seconds") long seconds;
    @Option(names = "--sets", paramLabel = "N", description = "run N sets") int sets;
    @Option(names = "--set-size", paramLabel = "M", defaultValue = "12", description = "definitions per set (default ${DEFAULT-VALUE}; the generator adds a function's 2 to 6 at once, so a set may hold a few more)") int setSize;
    @Option(names = "--out", paramLabel = "DIR", description = "summary and reproductions (default kpemu-fuzz-ARCH-SEED)") Path out;
    @Option(names = "--include-left-out", description = "also the classes the recorded corpus leaves out as machine-dependent: its left-out functions, registers at mid-function probes (their differences are classed 'left-out class')") boolean includeLeftOut;
    @Option(names = "--shrink-boots", paramLabel = "N", defaultValue = "3", description = "trials (a boot on each side) to shrink each new class's set (default ${DEFAULT-VALUE})") int shrinkBoots;
    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Override public Integer call() throws Exception {
        Arch a = ArchOption.one(spec, arch);
        KernelChoice k = KernelOption.parse(spec, kernel);
        if (seconds <= 0 && sets <= 0) throw new CommandLine.ParameterException(spec.commandLine(), "give --seconds N or --sets N");
        if (setSize < 1 || setSize > 200) throw new CommandLine.ParameterException(spec.commandLine(), "--set-size takes 1 to 200");
        if (shrinkBoots < 0) throw new CommandLine.ParameterException(spec.commandLine(), "--shrink-boots takes 0 or more");
        Path dir = out != null ? out : Path.of("kpemu-fuzz-" + a.linuxName() + "-" + seed);
        if (Files.exists(dir) && !Files.isDirectory(dir)) throw new CommandLine.ParameterException(spec.commandLine(), "--out " + dir + " is not a directory");
        var err = spec.commandLine().getErr();
        Fuzzer.Summary s;
        try {
            Fuzzer f = new Fuzzer(new Fuzzer.Config(a, k, seed, seconds, sets, setSize, dir, includeLeftOut, shrinkBoots), err);
            s = f.run();
        } catch (KernelImageException e) {
            err.println("kpemu: " + e.getMessage());
            return ExitCodes.ERROR;
        }
        var o = spec.commandLine().getOut();
        Files.readAllLines(dir.resolve("summary.txt")).forEach(o::println);
        o.flush();
        return s.of(FuzzClassifier.Category.KPEMU_DEFECT).isEmpty() ? ExitCodes.OK : ExitCodes.TRACE_DIFFERS;
    }
}
