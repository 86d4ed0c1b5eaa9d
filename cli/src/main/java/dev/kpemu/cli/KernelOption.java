package dev.kpemu.cli;

import java.nio.file.Path;

import picocli.CommandLine;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;

/** Parses a {@code --kernel FILE|debian[:SUITE][@RELEASE]} option; an unknown suite is a usage error (exit 2). */
final class KernelOption {
    static final String LABEL = "FILE|debian[:SUITE][@RELEASE]";
    /** The Debian half of the option's description; each command says what a file may be. */
    static final String HELP = "Debian's newest kernel of a suite: debian (the machine's own suite, the default), "
            + "debian:bookworm, debian:trixie, debian:sid (= unstable), debian:stable, debian:<suite>-backports (fetched on first use); "
            + "one build of it by its uname -r: debian:trixie@6.12.117+deb13 (while Debian's archive holds it)";

    private KernelOption() {}

    static KernelChoice parse(CommandLine.Model.CommandSpec spec, String value) {
        if (value == null) return KernelChoice.DEFAULT;
        try {
            return KernelChoice.parse(value);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
    }

    /** The kernel file to boot: the file itself, or the Debian suite's kernel (fetched if needed). */
    static Path file(KernelChoice choice, Arch arch) throws KernelImageException {
        return GuestImages.forRepository().kernel(arch, choice);
    }

    /** How the banner names the kernel: "Debian trixie 6.12.117+deb13-amd64", or the file. */
    static String describe(KernelChoice choice, Arch arch) throws KernelImageException {
        return switch (choice) {
            case KernelChoice.File f -> f.path().toString();
            case KernelChoice.Debian d -> "Debian " + GuestImages.suite(d) + " "
                    + GuestImages.forRepository().kernelVersion(arch, d).get("release");
        };
    }
}
