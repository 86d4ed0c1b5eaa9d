package dev.kpemu.cli;

import picocli.CommandLine;

import dev.kpemu.kprobes.events.Dialect;

/**
 * Parses {@code --dialect 6.1|6.12|7|mainline} (or a kernel release such as {@code 6.12.117}): the
 * kprobe_events language to speak instead of the booted kernel's own; unknown names are a usage
 * error (exit 2).
 */
final class DialectOption {
    static final String LABEL = "6.1|6.12|7|mainline";
    static final String HELP = "speak this kernel's kprobe_events language (grammar, types, error_log messages) "
            + "instead of the kernel's own: 6.1 (no BTF arguments), 6.12 (6.10 to 6.14: BTF arguments), "
            + "7 (6.15 and later), mainline (later grammar without BTF)";

    private DialectOption() {}

    /** The forced dialect, or null to follow the kernel. */
    static Dialect parse(CommandLine.Model.CommandSpec spec, String value) {
        if (value == null) return null;
        Dialect d = Dialect.byName(value);
        if (d == null) throw new CommandLine.ParameterException(spec.commandLine(), "unknown dialect '" + value + "' (" + LABEL + ")");
        return d;
    }
}
