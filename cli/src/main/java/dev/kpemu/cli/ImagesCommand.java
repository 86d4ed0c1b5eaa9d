package dev.kpemu.cli;

import java.io.PrintWriter;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;

/**
 * {@code kpemu images}: fetch (if needed) and show a guest's images; list the Debian kernels in
 * the cache; with {@code --resolve}, what each suite resolves to on the mirror now.
 */
@Command(name = "images", mixinStandardHelpOptions = true,
        description = {"Fetch (if not cached) and show the guest images; list the cached Debian kernels.",
                "Debian's newest kernel of a suite and busybox-static, and the initramfs kpemu builds from it."})
final class ImagesCommand implements Callable<Integer> {
    @Option(names = "--arch", description = "only this architecture (x86_64 or arm64)")
    String arch;

    @Option(names = "--kernel", paramLabel = "debian[:SUITE][@RELEASE]",
            description = "the Debian kernel to fetch and show: debian (the machine's suite, default), debian:bookworm, "
                    + "debian:trixie, debian:sid (= unstable), debian:stable, debian:<suite>-backports")
    String kernel;

    @Option(names = "--print", paramLabel = "WHAT",
            description = "print only one value, for scripts: kernel, initramfs, vmlinux (x86_64), release, package, version, suite")
    String print;

    @Option(names = "--resolve", description = "ask the mirror what each suite's newest kernel is now (private apt lists; downloads no kernel); "
            + "the --kernel suite only when given, else " + "bookworm, bookworm-backports, trixie, trixie-backports, sid")
    boolean resolve;

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Override public Integer call() throws KernelImageException {
        List<Arch> arches = ArchOption.orBoth(spec, arch);
        KernelChoice.Debian choice = debianChoice(spec, kernel);
        if (print != null && arches.size() != 1) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--print needs --arch");
        }
        PrintWriter out = spec.commandLine().getOut();
        GuestImages images = GuestImages.forRepository();
        if (resolve) {
            List<String> suites = kernel != null ? List.of(GuestImages.suite(choice)) : KernelChoice.RESOLVED_BY_DEFAULT;
            out.printf("%-20s %-7s %-36s %-22s %s%n", "suite", "arch", "package", "version", "release");
            for (String s : suites) {
                for (Arch a : arches) {
                    Map<String, String> r = images.resolve(a, new KernelChoice.Debian(s));
                    out.printf("%-20s %-7s %-36s %-22s %s%n", s, a.linuxName(), r.get("package"), r.get("version"), r.get("release"));
                    out.flush();
                }
            }
            return ExitCodes.OK;
        }
        for (Arch a : arches) {
            GuestImages.Guest g = images.guest(a, choice);
            if (print != null) {
                out.println(switch (print) {
                    case "kernel" -> g.kernel();
                    case "initramfs" -> g.initramfs();
                    case "release" -> g.release();
                    case "package", "version", "suite" -> g.version().getOrDefault(print, "?");
                    case "vmlinux" -> {
                        if (a != Arch.X86_64) throw new CommandLine.ParameterException(spec.commandLine(), "vmlinux exists only for x86_64 (arm64 boots the Image itself)");
                        yield images.vmlinux(a, choice);
                    }
                    default -> throw new CommandLine.ParameterException(spec.commandLine(),
                            "unknown --print value '" + print + "' (kernel, initramfs, vmlinux, release, package, version, suite)");
                });
            } else {
                out.printf("%s: Debian %s %s (%s %s)%n  kernel    %s%n  initramfs %s%n", a.linuxName(), GuestImages.suite(choice), g.release(),
                        g.version().get("package"), g.version().get("version"), g.kernel(), g.initramfs());
                if (a == Arch.X86_64) out.printf("  vmlinux   %s%n", images.vmlinux(a, choice));
            }
        }
        if (print == null) {
            out.println("cached Debian kernels:");
            out.printf("  %-20s %-7s %-36s %-22s %-24s %s%n", "suite", "arch", "package", "version", "release", "file");
            for (GuestImages.Cached c : images.cached()) {
                if (!arches.contains(c.arch())) continue;
                out.printf("  %-20s %-7s %-36s %-22s %-24s %s%n", c.suite(), c.arch().linuxName(), c.version().get("package"),
                        c.version().get("version"), c.release(), c.kernel());
            }
        }
        out.flush();
        return ExitCodes.OK;
    }

    /** Parses a {@code --kernel} value that must name a Debian kernel; a bad one is a usage error (exit 2). */
    static KernelChoice.Debian debianChoice(CommandLine.Model.CommandSpec spec, String value) {
        if (value == null) return KernelChoice.DEFAULT;
        KernelChoice c = KernelOption.parse(spec, value);
        if (c instanceof KernelChoice.Debian d) return d;
        throw new CommandLine.ParameterException(spec.commandLine(), "images shows Debian kernels: --kernel debian or debian:SUITE[@RELEASE], not a file");
    }
}
