package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * {@link TakingTurns} on two real processes (shell busy loops, each with a child of its own, as
 * /usr/bin/time has the JVM): after every turn given exactly one process tree runs and the other is
 * stopped, the turn goes round, a process that is not busy gives its turns away, and release lets
 * both go on. States are read from {@code /proc}; nothing is timed.
 */
class TakingTurnsTest {
    /** A shell that starts a busy child and waits for it: a tree of two processes. */
    private static Process busyTree() throws IOException {
        return new ProcessBuilder("sh", "-c", "sh -c 'while :; do :; done' & wait").redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
    }

    /** The state letters of the process and its descendants ('T': stopped). */
    private static List<Character> states(Process p) throws IOException {
        List<Character> out = new ArrayList<>();
        List<ProcessHandle> tree = new ArrayList<>(List.of(p.toHandle()));
        p.toHandle().descendants().forEach(tree::add);
        for (ProcessHandle h : tree) {
            String stat = Files.readString(Path.of("/proc", Long.toString(h.pid()), "stat"));
            out.add(stat.charAt(stat.lastIndexOf(')') + 2));
        }
        return out;
    }

    private static boolean stopped(Process p) throws IOException {
        return states(p).stream().allMatch(c -> c == 'T' || c == 't');
    }

    private static boolean running(Process p) throws IOException {
        return states(p).stream().noneMatch(c -> c == 'T' || c == 't');
    }

    interface Condition { boolean holds() throws IOException; }

    /**
     * Waits (bounded, 2 s) for {@code c}: a signal is taken when its process is next scheduled, so
     * right after kill() a stopping process may still show 'R' (a busy loop mid-slice) and a
     * continued one 'T'. The assertion after it fails when the state never comes.
     */
    private static void eventually(Condition c) throws IOException, InterruptedException {
        for (int i = 0; i < 200 && !c.holds(); i++) Thread.sleep(10);
    }

    /** Waits (bounded) for the shell to have started its busy child. */
    private static void awaitChild(Process p) throws InterruptedException {
        for (int i = 0; i < 200 && p.toHandle().descendants().findAny().isEmpty(); i++) Thread.sleep(10);
        assertTrue(p.toHandle().descendants().findAny().isPresent(), "the shell started its child");
    }

    @Test
    void exactlyOneTreeRunsAfterEachTurnAndTheTurnGoesRound() throws Exception {
        Process a = busyTree(), b = busyTree();
        TakingTurns turns = new TakingTurns();
        try {
            awaitChild(a);
            awaitChild(b);
            turns.add(a);
            turns.add(b);
            eventually(() -> stopped(a) && stopped(b));
            assertTrue(stopped(a) && stopped(b), "added processes wait for their turn: " + states(a) + " " + states(b));
            int last = -1;
            for (int i = 0; i < 6; i++) {
                turns.run(k -> true);
                eventually(() -> (running(a) && stopped(b)) || (running(b) && stopped(a)));
                boolean aRuns = running(a), bRuns = running(b);
                assertNotEquals(aRuns, bRuns, "one tree runs, the other is stopped: " + states(a) + " " + states(b));
                assertTrue(aRuns ? stopped(b) : stopped(a), states(a) + " " + states(b));
                int now = aRuns ? 0 : 1;
                assertNotEquals(last, now, "the turn went to the other process");
                last = now;
            }
            assertTrue(turns.runNanos(0) > 0 && turns.runNanos(1) > 0, "each held the turn");

            // b not busy: a runs turn after turn
            for (int i = 0; i < 3; i++) {
                turns.run(k -> k == 0);
                eventually(() -> running(a) && stopped(b));
                assertTrue(running(a) && stopped(b), states(a) + " " + states(b));
            }
            turns.release();
            eventually(() -> running(a) && running(b));
            assertTrue(running(a) && running(b), "released: both go on: " + states(a) + " " + states(b));
        } finally {
            turns.release();
            for (Process p : List.of(a, b)) {
                p.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
                p.destroyForcibly();
            }
        }
    }
}
