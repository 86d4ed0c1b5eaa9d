package dev.kpemu.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.api.KpemuSession;
import dev.kpemu.api.Kprobe;
import dev.kpemu.api.Outcome;
import dev.kpemu.api.SessionResult;

/**
 * A reproduced race: find the interleaving in which a race shows, then replay it at will.
 *
 * <p>The guest's shell starts two background jobs that each add 1 to the number in
 * {@code /tmp/n} — read it, write it back plus one, no lock. On two CPUs the jobs run at the same
 * time, and when one reads while the other is between its read and its write, one update is lost:
 * the file ends with 1, not 2. On real hardware that happens now and then. On kpemu the two vCPUs run in turn on a schedule
 * named by a seed ({@link KpemuSession.Builder#schedSeed}), so a seed <em>is</em> an
 * interleaving:
 *
 * <ol>
 *   <li><b>Search.</b> Run the guest with seeds 1, 2, 3, … until the symptom shows (here the
 *       command's output; it could as well be a probe's handler noticing it). Most seeds do not
 *       lose the update: the race needs the jobs to overlap closely.</li>
 *   <li><b>Report.</b> Print the seed. With the same kernel, command, probes and kpemu build it
 *       names this run on any host: the seed is the bug report.</li>
 *   <li><b>Replay.</b> Run that seed again: the same symptom and the same trace, every event on
 *       the same CPU at the same guest nanosecond.</li>
 * </ol>
 *
 * <p>The probes are part of the run: a probe changes the instructions the guest executes, and the
 * quanta are counted in guest instructions, so the replay registers exactly the probes the search
 * had ({@link #run} does both). With other probes the same seed may interleave otherwise.
 *
 * <p>The Java probe on {@code do_sys_openat2} records who opens {@code /tmp/n}, on which CPU and
 * when. The window is wider than it looks: {@code > /tmp/n} truncates the file when it opens it,
 * and the number is written only after that, so a job that reads between the other's open for
 * writing and its write reads an empty file and writes 1. The first lost update of seeds 1..20 on
 * Debian 12's 6.1 (x86-64, seed 6) is of that kind: one job on CPU 1 opens to write, and 18 µs
 * later, before its write, the other job on CPU 0 opens to read. A kretprobe_event on the same
 * function puts every open of the guest in the trace, which the replay must repeat line for line.
 */
@Tag("kernel")
class ReproducedRaceTest {
    /** Two background jobs each add 1 to /tmp/n, non-atomically; the shell prints the result. */
    static final String RACE = """
            echo 0 > /tmp/n
            add() { read n < /tmp/n; echo $((n + 1)) > /tmp/n; }
            add & add & wait
            cat /tmp/n""";
    static final int LAST_SEED = 20;

    /** What one run showed: the command's output, the opens of /tmp/n, and the whole trace. */
    record Run(String output, List<String> opens, List<String> trace) {
        boolean lostAnUpdate() { return output.equals("1\n"); }
    }

    static Run run(long seed) {
        List<String> opens = new ArrayList<>();
        KpemuSession session = KpemuSession.builder()
                .cpus(2).schedSeed(seed)
                .command("sh", "-c", RACE)
                .events("r:opened do_sys_openat2 fd=$retval")
                .build();
        session.register(Kprobe.on("do_sys_openat2").pre(ctx -> {
            if (!"/tmp/n".equals(ctx.string(ctx.arg("filename")).orElse(""))) return;
            boolean reading = (ctx.field("how", "flags").orElseThrow() & 3) == 0;    // O_ACCMODE == O_RDONLY
            opens.add("%d ns  cpu %d  %s[%d] opens /tmp/n to %s".formatted(ctx.nanos(), ctx.cpu(), ctx.comm(), ctx.pid(),
                    reading ? "read" : "write"));
        }));
        SessionResult r = session.run();
        assertEquals(Outcome.POWERED_OFF, r.outcome(), r.status());
        r.assertNoHandlerFailures();
        return new Run(r.commandOutput(), opens, r.traceLines());
    }

    @Test
    void findTheSeedThatLosesAnUpdateThenReplayIt() {
        // 1. search
        long seed = 0;
        Run race = null;
        while (race == null && seed < LAST_SEED) {
            seed++;
            Run r = run(seed);
            System.out.println("seed " + seed + ": /tmp/n = " + r.output().strip());
            if (r.lostAnUpdate()) race = r;
        }
        assertNotNull(race, "no seed of 1.." + LAST_SEED + " lost an update");

        // 2. report
        System.out.println("lost update with --cpus 2 --sched-seed " + seed + ":");
        race.opens().forEach(line -> System.out.println("  " + line));

        // 3. replay
        Run again = run(seed);
        assertEquals("1\n", again.output(), "the replay loses the update too");
        assertEquals(race.opens(), again.opens(), "the same opens, on the same CPUs, at the same guest times");
        assertEquals(race.trace(), again.trace(), "the same trace, line for line");
    }
}
