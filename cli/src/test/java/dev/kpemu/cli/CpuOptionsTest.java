package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.kpemu.boot.BootRunner;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Schedule;
import picocli.CommandLine;

/** {@code --cpus} and {@code --sched-seed} of {@code boot} and {@code demo}: parsed, checked, and carried to {@link BootRunner.Options}. */
class CpuOptionsTest {
    static CommandLine parsed(String command, String... args) {
        CommandLine cl = Main.commandLine();
        java.util.List<String> all = new java.util.ArrayList<>(java.util.List.of(command, "--arch", "x86_64"));   // boot requires it
        all.addAll(java.util.List.of(args));
        cl.parseArgs(all.toArray(String[]::new));
        return cl.getSubcommands().get(command);
    }

    static CpuOptions options(CommandLine sub) {
        Object c = sub.getCommand();
        return c instanceof BootCommand b ? b.cpuOptions : ((DemoCommand) c).cpuOptions;
    }

    @Test
    void theValuesReachTheBootOptions() {
        for (String command : new String[] {"boot", "demo"}) {
            CommandLine sub = parsed(command, "--cpus", "4", "--sched-seed", "7");
            BootRunner.Options o = options(sub).apply(BootRunner.Options.defaults(Arch.X86_64), sub.getCommandSpec());
            assertEquals(4, o.cpus(), command);
            assertEquals(7, o.schedSeed(), command);
        }
    }

    @Test
    void theDefaultIsOneCpuOnTheDefaultSchedule() {
        for (String command : new String[] {"boot", "demo"}) {
            CommandLine sub = parsed(command);
            BootRunner.Options o = options(sub).apply(BootRunner.Options.defaults(Arch.ARM64), sub.getCommandSpec());
            assertEquals(1, o.cpus(), command);
            assertEquals(Schedule.DEFAULT_SEED, o.schedSeed(), command);
        }
    }

    @Test
    void aCpuCountOutOfRangeIsAUsageErrorBeforeAnythingRuns() {
        for (String[] args : new String[][] {{"boot", "--arch", "x86_64", "--cpus", "9"}, {"demo", "--arch", "arm64", "--cpus", "0"}}) {
            CliTest.Run r = CliTest.run(args);
            assertEquals(ExitCodes.USAGE, r.code(), r.err());
            assertTrue(r.err().contains("--cpus must be 1 to " + BootRunner.Options.MAX_CPUS), r.err());
        }
    }

    @Test
    void helpDescribesBoth() {
        for (String command : new String[] {"boot", "demo"}) {
            CliTest.Run r = CliTest.run(command, "--help");
            assertEquals(ExitCodes.OK, r.code(), r.err());
            assertTrue(r.out().contains("--cpus=N") && r.out().contains("--sched-seed=S"), r.out());
        }
    }
}
