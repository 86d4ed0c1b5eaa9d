package dev.kpemu.cli;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;

/**
 * {@code kpemu corpus}: the differential corpus of issue 11 (guest-images/record-corpus.sh runs it):
 * {@code initramfs} writes the corpus guest ({@link CorpusGuest}); {@code generate} writes the
 * probe definitions ({@link CorpusGenerator}).
 */
@Command(name = "corpus", mixinStandardHelpOptions = true,
        description = {"The differential corpus: its guest and its probe definitions (see guest-images/record-corpus.sh)."},
        subcommands = {CorpusCommand.Archive.class, CorpusCommand.Generate.class, CorpusCommand.PatchedSites.class, CorpusCommand.OptimizedSites.class})
final class CorpusCommand implements Runnable {
    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Override public void run() { spec.commandLine().usage(spec.commandLine().getOut()); }

    @Command(name = "initramfs", mixinStandardHelpOptions = true, description = "Write the corpus guest (mode linux, survey or kpemu).")
    static final class Archive implements Callable<Integer> {
        @Option(names = "--arch", required = true) String arch;
        @Option(names = "--mode", required = true, description = "linux, survey or kpemu") String mode;
        @Option(names = "--events", description = "the definitions (mode linux)") Path events;
        @Option(names = "--setup", description = "tracefs writes after enabling (mode linux): FILE<TAB>TEXT lines, # comments") Path setup;
        @Option(names = "--read-refused", description = "print each refused tracefs file's text too (runs programs during the set-up: later pids move)") boolean readRefused;
        @Option(names = "--settle", paramLabel = "SECONDS", description = "mode linux: wait this long after enabling the events, before the workload (kpemu fuzz: Linux's optimizer makes its jumps)") int settle;
        @Option(names = {"-o", "--output"}, required = true) Path output;
        @CommandLine.Spec CommandLine.Model.CommandSpec spec;

        @Override public Integer call() throws KernelImageException, IOException {
            if (settle < 0) throw new CommandLine.ParameterException(spec.commandLine(), "--settle takes 0 or more seconds");
            Arch a = ArchOption.one(spec, arch);
            List<String> defs = events == null ? List.of() : CorpusGenerator.definitions(Files.readAllLines(events));
            byte[] bb = Files.readAllBytes(GuestImages.forRepository().busybox(a));
            List<String> writes = setup == null ? List.of() : Files.readAllLines(setup).stream()
                    .filter(l -> !l.isBlank() && !l.startsWith("#")).toList();
            CorpusGuest.archive(bb, mode, defs, writes, readRefused, settle).write(output);
            spec.commandLine().getOut().println(output);
            return ExitCodes.OK;
        }
    }

    @Command(name = "generate", mixinStandardHelpOptions = true, description = "Write the corpus definitions for the default kernel.")
    static final class Generate implements Callable<Integer> {
        @Option(names = "--arch", required = true) String arch;
        @Option(names = "--survey", required = true, description = "the function survey recorded under QEMU") Path survey;
        @Option(names = "--seed", defaultValue = "11") long seed;
        @Option(names = "--count", defaultValue = "560", description = "definitions to generate (default ${DEFAULT-VALUE})") int count;
        @Option(names = {"-o", "--output"}, required = true) Path output;
        @Option(names = "--kernel", paramLabel = KernelOption.LABEL, description = KernelOption.HELP) String kernel;
        @CommandLine.Spec CommandLine.Model.CommandSpec spec;

        @Override public Integer call() throws Exception {
            Arch a = ArchOption.one(spec, arch);
            CorpusGenerator g = CorpusGenerator.forKernel(a, KernelOption.parse(spec, kernel), Files.readAllLines(survey));
            Files.writeString(output, g.generate(seed, count));
            spec.commandLine().getOut().println(output);
            return ExitCodes.OK;
        }
    }

    @Command(name = "patched-sites", mixinStandardHelpOptions = true,
            description = "Write definitions at the sites an x86 kernel rewrites while it boots (guest-images/record-error-log.sh ARCH patched).")
    static final class PatchedSites implements Callable<Integer> {
        @Option(names = "--arch", defaultValue = "x86_64") String arch;
        @Option(names = "--seed", defaultValue = "1") long seed;
        @Option(names = "--per-kind", defaultValue = "12", description = "sites of each kind (default ${DEFAULT-VALUE})") int perKind;
        @Option(names = "--kernel", paramLabel = KernelOption.LABEL, description = KernelOption.HELP) String kernel;
        @CommandLine.Spec CommandLine.Model.CommandSpec spec;

        @Override public Integer call() throws Exception {
            Arch a = ArchOption.one(spec, arch);
            PatchedSitesCorpus.generate(a, KernelOption.parse(spec, kernel), seed, perKind).forEach(spec.commandLine().getOut()::println);
            spec.commandLine().getOut().flush();
            return ExitCodes.OK;
        }
    }

    @Command(name = "optimized-sites", mixinStandardHelpOptions = true,
            description = "Write definitions whose jump optimization the kernel decides (guest-images/record-error-log.sh --kprobes-list ARCH optimized).")
    static final class OptimizedSites implements Callable<Integer> {
        @Option(names = "--arch", defaultValue = "x86_64") String arch;
        @Option(names = "--seed", defaultValue = "1") long seed;
        @Option(names = "--per-kind", defaultValue = "20", description = "sites of each kind (default ${DEFAULT-VALUE})") int perKind;
        @Option(names = "--kernel", paramLabel = KernelOption.LABEL, description = KernelOption.HELP) String kernel;
        @CommandLine.Spec CommandLine.Model.CommandSpec spec;

        @Override public Integer call() throws Exception {
            Arch a = ArchOption.one(spec, arch);
            OptimizedSitesCorpus.generate(a, KernelOption.parse(spec, kernel), seed, perKind).forEach(spec.commandLine().getOut()::println);
            spec.commandLine().getOut().flush();
            return ExitCodes.OK;
        }
    }
}
