package dev.kpemu.cli;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import dev.kpemu.boot.BootRunner;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;
import dev.kpemu.session.TracedBoot;

/**
 * {@code kpemu demo}: the first thing a newcomer runs. Boots Debian's kernel on each
 * architecture with a built-in probe script on the open path (a kprobe with the file name read
 * from user memory, a kretprobe with the return value), prints the ftrace-format trace and then
 * the kprobe_profile table.
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = {"Boot Debian's kernel on both arches with probes on the open path; print the trace.",
                "A kprobe and a kretprobe on do_sys_openat2; then the kprobe_profile table. Guest consoles go to files."})
final class DemoCommand implements Callable<Integer> {
    /** The built-in script: the open path, as written to kprobe_events (registers per arch). */
    static List<String> script(Arch arch) {
        String args = arch == Arch.X86_64 ? "dfd=%di fn=+0(%si):ustring" : "dfd=%x0 fn=+0(%x1):ustring";
        return List.of("p:myopen do_sys_openat2 " + args, "r:myret do_sys_openat2 ret=$retval");
    }

    @Option(names = "--arch", description = "only this architecture (x86_64 or arm64)")
    String arch;

    @Option(names = "--kernel", paramLabel = KernelOption.LABEL, description = "kernel to boot: an image file (needs --arch), or " + KernelOption.HELP)
    String kernel;

    @CommandLine.Mixin CpuOptions cpuOptions = new CpuOptions();

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Override public Integer call() throws IOException, KernelImageException {
        cpuOptions.check(spec);
        List<Arch> arches = ArchOption.orBoth(spec, arch);
        KernelChoice choice = KernelOption.parse(spec, kernel);
        if (choice instanceof KernelChoice.File && arches.size() != 1) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--kernel FILE needs --arch (a kernel file is for one architecture)");
        }
        PrintWriter out = spec.commandLine().getOut(), err = spec.commandLine().getErr();
        PrintStream trace = WriterOutputStream.printStream(out);
        Path logs = GuestImages.forRepository().cacheRoot().resolve("demo");
        Files.createDirectories(logs);
        List<Integer> codes = new ArrayList<>();
        for (Arch a : arches) {
            Path consoleLog = logs.resolve(a.linuxName() + "-console.log");
            Path kernelFile = KernelOption.file(choice, a);
            // kpemu's own lines (what runs, how it ended) on stderr; the trace and the table on stdout
            err.printf("== %s: %s, probes:%n", a.linuxName(), KernelOption.describe(choice, a));
            for (String d : script(a)) err.println("   " + d);
            err.printf("   (guest console: %s)%n", consoleLog);
            err.flush();
            TracedBoot traced = new TracedBoot(script(a), trace);
            BootRunner.Result r;
            try (OutputStream con = Files.newOutputStream(consoleLog)) {
                r = BootRunner.boot(cpuOptions.apply(new BootRunner.Options(a, kernelFile, null, null, 256, 60, con, null), spec), traced);
            }
            trace.flush();
            if (traced.events() != null) {
                out.println("-- kprobe_profile");
                out.print(traced.events().profile());
            }
            out.flush();
            err.printf("-- %s: %s (exit %d); guest %.3f s, %d instructions; host %.2f s%n%n", a.linuxName(), r.status(),
                    ExitCodes.of(r.outcome()), r.guestNanos() / 1e9, r.instructions(), r.hostNanos() / 1e9);
            err.flush();
            codes.add(ExitCodes.of(r.outcome()));
        }
        return codes.stream().filter(c -> c != ExitCodes.OK).findFirst().orElse(ExitCodes.OK);
    }
}
