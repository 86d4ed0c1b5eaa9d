package dev.kpemu.cli;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.HostFiles;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;

/**
 * {@code kpemu initramfs}: writes kpemu's busybox guest as a newc archive, optionally with another
 * {@code /init} and files from the host, for any machine that boots an initramfs (QEMU too: the
 * recording scripts under guest-images/ use it so Linux's reference runs see the same guest).
 */
@Command(name = "initramfs", mixinStandardHelpOptions = true,
        description = {"Write kpemu's busybox initramfs, optionally with your own /init and files from the host.",
                "The archive boots under kpemu and under any other machine (QEMU)."})
final class InitramfsCommand implements Callable<Integer> {
    @Option(names = "--arch", required = true, paramLabel = "ARCH", description = "x86_64 or arm64")
    String arch;

    @Option(names = {"-o", "--output"}, required = true, paramLabel = "FILE", description = "the archive to write")
    Path output;

    @Option(names = "--init", paramLabel = "FILE", description = "a script or static program to run as /init instead of kpemu's default workload")
    Path init;

    @Option(names = "--add", paramLabel = "HOSTPATH[:GUESTPATH]",
            description = "copy a file or directory into the guest (repeatable); default guest path: /NAME")
    List<String> add = new ArrayList<>();

    @Option(names = "--kernel", paramLabel = KernelOption.LABEL, defaultValue = "debian",
            description = "the kernel whose modules --modules takes (default: the machine's Debian suite)")
    String kernel;

    @Option(names = "--modules", paramLabel = "NAME[,NAME…]",
            description = "the kernel's own modules (and their dependencies), loaded by /init before the guest's init runs (repeatable)")
    List<String> modules = new ArrayList<>();

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Override public Integer call() throws KernelImageException, IOException {
        Arch a = ArchOption.one(spec, arch);
        GuestImages images = GuestImages.forRepository();
        Initramfs archive = Initramfs.defaultGuest(Files.readAllBytes(images.busybox(a)));
        try {
            if (init != null) HostFiles.addExecutable(archive, init, "init", a);
            for (String spec : add) HostFiles.add(archive, HostFiles.Mapping.parse(spec), a);
            List<String> names = GuestModules.names(modules);
            if (!names.isEmpty()) {
                var loaded = GuestModules.install(archive, a, KernelOption.parse(spec, kernel), names);
                spec.commandLine().getErr().println("kpemu: modules " + String.join(" ", loaded.stream().map(m -> m.name()).toList()));
            }
        } catch (KernelImageException e) {
            spec.commandLine().getErr().println("kpemu: " + e.getMessage());
            return ExitCodes.USAGE;
        }
        archive.write(output);
        spec.commandLine().getOut().println(output);
        return ExitCodes.OK;
    }
}
