package dev.kpemu.cli;

import java.util.List;

import picocli.CommandLine;

import dev.kpemu.machine.Arch;

/** Parses an {@code --arch} option; a bad value is a usage error (exit 2). */
final class ArchOption {
    private ArchOption() {}

    static Arch one(CommandLine.Model.CommandSpec spec, String value) {
        try {
            return Arch.parse(value);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
    }

    /** Both architectures when {@code value} is null, else the one it names. */
    static List<Arch> orBoth(CommandLine.Model.CommandSpec spec, String value) {
        return value == null ? List.of(Arch.X86_64, Arch.ARM64) : List.of(one(spec, value));
    }
}
