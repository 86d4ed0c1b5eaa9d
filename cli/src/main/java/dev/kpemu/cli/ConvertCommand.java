package dev.kpemu.cli;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import dev.kpemu.kprobes.events.RecordedTrace;

/** {@code kpemu convert --format perfetto TRACE}: a recorded trace as Chrome/Perfetto trace-event JSON. */
@Command(name = "convert", mixinStandardHelpOptions = true,
        description = {"Convert a trace recorded with 'kpemu boot --record' to another format.",
                "perfetto: Chrome/Perfetto trace-event JSON; open it in ui.perfetto.dev or chrome://tracing."})
final class ConvertCommand implements Callable<Integer> {
    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Parameters(index = "0", paramLabel = "TRACE", description = "a recorded trace")
    Path input;

    @Option(names = "--format", paramLabel = "FORMAT", defaultValue = "perfetto", description = "perfetto (the default and only one)")
    String format;

    @Option(names = {"-o", "--output"}, paramLabel = "FILE", description = "where to write (default: stdout)")
    Path output;

    @Override public Integer call() throws IOException {
        PrintWriter err = spec.commandLine().getErr();
        if (!format.equals("perfetto")) throw new CommandLine.ParameterException(spec.commandLine(), "--format must be perfetto, not '" + format + "'");
        RecordedTrace t;
        try {
            t = CompareCommand.read(spec, input);
        } catch (RecordedTrace.MalformedTraceException e) {
            err.println("kpemu: " + e.getMessage());
            return ExitCodes.ERROR;
        }
        PerfettoTrace p = PerfettoTrace.of(t);
        if (output == null) {
            p.write(WriterOutputStream.printStream(spec.commandLine().getOut()));
        } else {
            try (OutputStream o = Files.newOutputStream(output)) {
                p.write(o);
            }
        }
        var c = p.counts();
        err.printf("kpemu: perfetto JSON: %d task tracks, %d instants, %d slices, %d phases%n", c.tracks(), c.instants(), c.slices(), c.phases());
        err.flush();
        return ExitCodes.OK;
    }
}
