package dev.kpemu.cli;

import java.io.PrintWriter;
import java.util.List;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;

/** {@code kpemu images}: fetch (if needed) and show the default guest images. */
@Command(name = "images", mixinStandardHelpOptions = true,
        description = {"Fetch (if not cached) and show the default guest images.",
                "Debian's newest kernel and busybox-static, and the initramfs kpemu builds from it."})
final class ImagesCommand implements Callable<Integer> {
    @Option(names = "--arch", description = "only this architecture (x86_64 or arm64)")
    String arch;

    @Option(names = "--print", paramLabel = "WHAT",
            description = "print only one path, for scripts: kernel, initramfs, vmlinux (x86_64), release")
    String print;

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Override public Integer call() throws KernelImageException {
        List<Arch> arches = ArchOption.orBoth(spec, arch);
        if (print != null && arches.size() != 1) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--print needs --arch");
        }
        PrintWriter out = spec.commandLine().getOut();
        GuestImages images = GuestImages.forRepository();
        for (Arch a : arches) {
            GuestImages.Guest g = images.guest(a);
            if (print != null) {
                out.println(switch (print) {
                    case "kernel" -> g.kernel();
                    case "initramfs" -> g.initramfs();
                    case "release" -> g.release();
                    case "vmlinux" -> {
                        if (a != Arch.X86_64) throw new CommandLine.ParameterException(spec.commandLine(), "vmlinux exists only for x86_64 (arm64 boots the Image itself)");
                        yield images.vmlinux(a);
                    }
                    default -> throw new CommandLine.ParameterException(spec.commandLine(), "unknown --print value '" + print + "' (kernel, initramfs, vmlinux, release)");
                });
            } else {
                out.printf("%s: Debian %s%n  kernel    %s%n  initramfs %s%n", a.linuxName(), g.release(), g.kernel(), g.initramfs());
                if (a == Arch.X86_64) out.printf("  vmlinux   %s%n", images.vmlinux(a));
            }
        }
        out.flush();
        return ExitCodes.OK;
    }
}
