package dev.kpemu.cli;

import dev.kpemu.boot.BootRunner;
import dev.kpemu.machine.Schedule;
import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * {@code --cpus N} and {@code --sched-seed S}, shared by {@code kpemu boot} and {@code kpemu demo}
 * (a picocli mixin): the guest's virtual CPUs and the seed of the schedule that runs them in turn
 * on one host thread ({@link Schedule}). They reach {@link BootRunner.Options#withCpus}; the
 * boards do not read them yet (issue 26), so a boot still runs one CPU.
 */
final class CpuOptions {
    @Option(names = "--cpus", paramLabel = "N", defaultValue = "1",
            description = "virtual CPUs, 1 to " + BootRunner.Options.MAX_CPUS + ", run in turn on one host thread (default ${DEFAULT-VALUE})")
    int cpus;

    @Option(names = "--sched-seed", paramLabel = "S", defaultValue = "" + Schedule.DEFAULT_SEED,
            description = "the seed naming the vCPUs' interleaving: ${DEFAULT-VALUE} a round-robin of "
                    + Schedule.DEFAULT_QUANTUM + "-instruction quanta, any other a seeded draw of order and quanta; the same seed repeats a run")
    long schedSeed;

    /** A usage error (exit 2) when {@code --cpus} is out of range: checked before anything is prepared. */
    void check(CommandLine.Model.CommandSpec spec) {
        if (cpus < 1 || cpus > BootRunner.Options.MAX_CPUS)
            throw new CommandLine.ParameterException(spec.commandLine(), "--cpus must be 1 to " + BootRunner.Options.MAX_CPUS + ", not " + cpus);
    }

    /** {@code options} with these CPUs and seed; a usage error (exit 2) when {@code --cpus} is out of range. */
    BootRunner.Options apply(BootRunner.Options options, CommandLine.Model.CommandSpec spec) {
        try {
            return options.withCpus(cpus, schedSeed);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
    }
}
