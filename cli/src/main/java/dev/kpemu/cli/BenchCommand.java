package dev.kpemu.cli;

import java.io.PrintWriter;
import java.util.List;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import dev.kpemu.bench.UnicornBench;
import dev.kpemu.optprobes.bench.OptimizedProbeBench;
import dev.kpemu.machine.Arch;

/** {@code kpemu bench WHAT}: measured costs, as medians over repeated batches, for both arches. */
@Command(name = "bench", mixinStandardHelpOptions = true,
        description = {"Run a benchmark and print medians for both architectures.",
                "  unicorn  cost of an interrupt-hook round trip, a register read, a one-instruction",
                "           step and a stop+restart on the Unicorn binding",
                "  probes   per-hit cost of a stepped, a boosted and an optimized kprobe and a kretprobe with a",
                "           trivial Java handler, against the same loop unprobed (bare-metal guest)"})
final class BenchCommand implements Callable<Integer> {
    enum What { unicorn, probes }

    @Parameters(index = "0", paramLabel = "WHAT", description = "what to measure: ${COMPLETION-CANDIDATES}")
    What what;

    @Option(names = "--arch", description = "only this architecture (x86_64 or arm64)")
    String arch;

    @Option(names = "--batches", description = "batches per figure (default: 31 for unicorn, 9 for probes)")
    Integer batches;

    @Option(names = "--per-batch", description = "operations per batch (default: 20000 for unicorn, 100000 probe hits for probes)")
    Integer perBatch;

    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @Override public Integer call() {
        int batches = this.batches != null ? this.batches : what == What.unicorn ? 31 : 9;
        int perBatch = this.perBatch != null ? this.perBatch : what == What.unicorn ? 20000 : 100_000;
        if (batches < 1 || perBatch < 1) throw new CommandLine.ParameterException(spec.commandLine(), "--batches and --per-batch must be positive");
        List<Arch> arches = ArchOption.orBoth(spec, arch);
        PrintWriter out = spec.commandLine().getOut();
        if (what == What.probes) {
            out.printf("per-hit cost over the unprobed loop, median of %d batches of %d calls%n"
                    + "(targets: kprobe <= 1.0, boosted <= 0.5, kretprobe <= 1.5, optimized <= 0.15 us)%n", batches, perBatch);
            for (Arch a : arches) out.println(OptimizedProbeBench.run(a, perBatch, batches).format());
            out.flush();
            return ExitCodes.OK;
        }
        out.printf("%-8s %-58s %12s %12s %12s%n", "arch", "operation", "median us", "min us", "max us");
        for (Arch a : arches) {
            for (UnicornBench.Result r : UnicornBench.run(a, batches, perBatch)) {
                out.printf("%-8s %-58s %12.3f %12.3f %12.3f%n", a.linuxName(), r.operation(),
                        r.medianNanos() / 1000, r.minNanos() / 1000, r.maxNanos() / 1000);
            }
        }
        out.printf("(%d batches of %d operations each; Unicorn via Java %d FFM)%n", batches, perBatch, Runtime.version().feature());
        out.flush();
        return ExitCodes.OK;
    }
}
