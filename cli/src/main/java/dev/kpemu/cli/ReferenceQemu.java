package dev.kpemu.cli;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;

/**
 * The reference machine the benches run beside kpemu: QEMU's system emulator for an arch, found on
 * {@code PATH} or installed the way {@code guest-images/qemu-reference.sh} installs it for the
 * recording scripts ({@code need_qemu}: Debian's {@code qemu-system-x86} / {@code qemu-system-arm},
 * as root). A bench on a machine without it and without a way to install it stops with one line
 * saying which package to install, not with the first run's "cannot run" error.
 */
final class ReferenceQemu {
    private ReferenceQemu() {}

    /** {@code qemu-system-x86_64} or {@code qemu-system-aarch64}. */
    static String command(Arch arch) {
        return arch == Arch.X86_64 ? "qemu-system-x86_64" : "qemu-system-aarch64";
    }

    /** The command and the machine the benches boot: QEMU's {@code pc}, or {@code virt} with a Cortex-A57. */
    static List<String> machine(Arch arch) {
        return arch == Arch.X86_64 ? List.of(command(arch), "-M", "pc") : List.of(command(arch), "-M", "virt", "-cpu", "cortex-a57");
    }

    /** Debian's package that holds {@link #command}. */
    static String debianPackage(Arch arch) {
        return arch == Arch.X86_64 ? "qemu-system-x86" : "qemu-system-arm";
    }

    /** Whether {@code command} is an executable file in one of {@code path}'s directories. */
    static boolean onPath(String command, String path) {
        if (path == null) return false;
        for (String dir : path.split(File.pathSeparator)) {
            if (dir.isEmpty()) continue;
            Path p = Path.of(dir, command);
            if (Files.isRegularFile(p) && Files.isExecutable(p)) return true;
        }
        return false;
    }

    /**
     * Makes sure QEMU for {@code arch} can be run: on {@code PATH} already, or installed by the
     * recording scripts' {@code need_qemu} (the repository at {@code root}); its messages go to
     * this process's stderr.
     *
     * @throws KernelImageException when it is missing and could not be installed
     */
    static void require(Path root, Arch arch) throws KernelImageException, IOException {
        require(root, arch, System.getenv("PATH"));
    }

    /** {@link #require(Path, Arch)} with {@code path} as the directories to look in. */
    static void require(Path root, Arch arch, String path) throws KernelImageException, IOException {
        String cmd = command(arch);
        if (onPath(cmd, path)) return;
        Path script = root == null ? null : root.resolve("guest-images/qemu-reference.sh");
        if (script != null && Files.isRegularFile(script)) {
            ProcessBuilder pb = new ProcessBuilder("bash", "-c", ". \"$0\" && prog='kpemu bench' && need_qemu \"$1\"",
                    script.toString(), arch.linuxName()).redirectOutput(ProcessBuilder.Redirect.INHERIT)
                    .redirectError(ProcessBuilder.Redirect.INHERIT);
            try {
                if (pb.start().waitFor() == 0 && onPath(cmd, path)) return;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while installing " + debianPackage(arch));
            }
        }
        throw new KernelImageException(cmd + " is missing: the bench runs QEMU beside kpemu; install Debian's " + debianPackage(arch));
    }
}
