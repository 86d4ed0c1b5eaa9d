package dev.kpemu.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import dev.kpemu.kprobes.events.RecordedTrace;
import dev.kpemu.kprobes.events.TraceComparison;

/**
 * {@code kpemu compare GOLDEN NEW}: compares two traces recorded with {@code kpemu boot --record}
 * event by event and prints the semantic diff; exit 0 when equal, {@link ExitCodes#TRACE_DIFFERS}
 * when not.
 */
@Command(name = "compare", mixinStandardHelpOptions = true,
        description = {"Compare two traces recorded with 'kpemu boot --record', event by event.",
                "Exact on the same kernel build (with tasks, and timestamps where guest time is deterministic);",
                "tolerant of the symbol sizes and offsets a rebuild moves on another build of the kernel."},
        footer = {"", "Exit codes: 0 equal, 1 error (a file that is no kpemu trace), 2 usage (missing file, different arches),",
                "5 the traces differ (the diff is printed)."})
final class CompareCommand implements Callable<Integer> {
    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Parameters(index = "0", paramLabel = "GOLDEN", description = "the expected trace")
    Path golden;

    @Parameters(index = "1", paramLabel = "NEW", description = "the trace to check")
    Path actual;

    @Option(names = "--mode", paramLabel = "MODE", defaultValue = "auto",
            description = "auto (exact on the same kernel build, else tolerant), exact, tolerant; default ${DEFAULT-VALUE}")
    String mode;

    @Override public Integer call() throws IOException {
        PrintWriter out = spec.commandLine().getOut(), err = spec.commandLine().getErr();
        TraceComparison.Choice c = choice(spec, mode);
        RecordedTrace e, a;
        try {
            e = read(spec, golden);
            a = read(spec, actual);
        } catch (RecordedTrace.MalformedTraceException ex) {
            err.println("kpemu: " + ex.getMessage());
            return ExitCodes.ERROR;
        }
        if (e.header().arch() != a.header().arch()) {
            err.println("kpemu: cannot compare: " + golden + " is " + e.header().arch().linuxName() + ", " + actual + " is "
                    + a.header().arch().linuxName());
            return ExitCodes.USAGE;
        }
        TraceComparison.Outcome o = TraceComparison.compare(e, a, c);
        out.print(o.diff());
        out.flush();
        return o.matches() ? ExitCodes.OK : ExitCodes.TRACE_DIFFERS;
    }

    static TraceComparison.Choice choice(CommandLine.Model.CommandSpec spec, String mode) {
        try {
            return TraceComparison.Choice.valueOf(mode.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--mode must be auto, exact or tolerant, not '" + mode + "'");
        }
    }

    /** Reads a recorded trace; a missing file is a usage error, a damaged one {@link RecordedTrace.MalformedTraceException}. */
    static RecordedTrace read(CommandLine.Model.CommandSpec spec, Path p) throws IOException {
        try {
            return RecordedTrace.read(p);
        } catch (NoSuchFileException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "no such file: " + p);
        } catch (java.nio.file.FileSystemException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "cannot read " + p + ": " + e.getReason());
        }
    }
}
