package dev.kpemu.cli;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import dev.kpemu.boot.BootRunner;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;

/**
 * {@code kpemu boot}: boots a Linux kernel (by default Debian's, with the default initramfs)
 * and exits with the guest's outcome. Guest console to stderr (or {@code --console}), kpemu's
 * own lines to stdout.
 */
@Command(name = "boot", mixinStandardHelpOptions = true,
        description = {"Boot a Linux kernel (default: Debian's current kernel and kpemu's initramfs) until it powers off."},
        footer = {"", "Exit codes: 0 the guest powered off, 1 error, 2 usage, 3 guest panic or unhandled guest fault, 4 timeout."})
final class BootCommand implements Callable<Integer> {
    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Option(names = "--arch", required = true, paramLabel = "ARCH", description = "x86_64 or arm64")
    String arch;

    @Option(names = "--kernel", paramLabel = "FILE", description = "kernel image (x86_64: bzImage or vmlinux; arm64: Image, as Debian's vmlinuz)")
    Path kernel;

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

    @Override public Integer call() throws IOException {
        PrintWriter out = spec.commandLine().getOut();
        Arch a;
        try {
            a = Arch.parse(arch);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "unknown --arch '" + arch + "' (x86_64 or arm64)");
        }
        if (memoryMiB < 64) throw new CommandLine.ParameterException(spec.commandLine(), "--memory must be at least 64 MiB");
        if (timeoutSeconds <= 0) throw new CommandLine.ParameterException(spec.commandLine(), "--timeout must be positive");
        OutputStream con = "-".equals(console) ? System.err : new FileOutputStream(console);
        try {
            BootRunner.Result r;
            try {
                r = BootRunner.boot(new BootRunner.Options(a, kernel, initrd, append, memoryMiB, timeoutSeconds, con, toPrintStream(out)));
            } catch (KernelImageException e) {
                spec.commandLine().getErr().println("kpemu: " + e.getMessage());
                return ExitCodes.ERROR;
            }
            out.printf("kpemu: %s (exit %d); guest %.3f s, %d instructions, %d interrupts; host %.2f s",
                    r.status(), r.exitCode(), r.guestNanos() / 1e9, r.instructions(), r.interrupts(), r.hostNanos() / 1e9);
            if (r.initDoneHostNanos() >= 0) out.printf("; init marker at host %.2f s", r.initDoneHostNanos() / 1e9);
            out.println();
            if (r.exitCode() != ExitCodes.OK) {
                out.printf("kpemu: pc 0x%x %s%n", r.pc(), r.symbol());
                out.println("kpemu: last console lines:");
                for (String l : r.lastLines()) out.println("  " + l);
            }
            out.flush();
            return r.exitCode();
        } finally {
            if (con != System.err) con.close();
            else System.err.flush();
        }
    }

    private static java.io.PrintStream toPrintStream(PrintWriter w) {
        return new java.io.PrintStream(new OutputStream() {
            @Override public void write(int b) { w.write(b); }
            @Override public void flush() { w.flush(); }
        }, true);
    }
}
