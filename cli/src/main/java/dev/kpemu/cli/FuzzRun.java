package dev.kpemu.cli;

import java.util.List;
import java.util.Map;

/**
 * What one machine answered to one fuzz set ({@code kpemu fuzz}): the definitions it refused
 * (each with its error_log message, "" when none), the trace's event lines, the command that
 * reproduces the run, and whether the guest reached the end of the workload ({@code failure}
 * says why not, else null).
 */
record FuzzRun(Map<String, String> refused, List<String> traceLines, String command, String failure) {
    FuzzRun {
        refused = Map.copyOf(refused);
        traceLines = List.copyOf(traceLines);
    }

    boolean finished() { return failure == null; }
}
