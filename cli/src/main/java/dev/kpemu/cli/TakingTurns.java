package dev.kpemu.cli;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntPredicate;

/**
 * Benchmark processes that run side by side, taking turns (issue 30). The speed of a shared host
 * drifts by tens of percent within minutes (the same plain job took 16 and 31 CPU s half an hour
 * apart, 2026-12-01), far more than what a pair of runs one after the other is meant to resolve.
 * Two runs that take turns of {@value #TURN_MILLIS} ms see the same machine at the same moments:
 * its drift cancels in their difference. Only one of them runs at a time (the others are stopped
 * with {@code SIGSTOP}, their whole process tree), so neither competes with the other for the CPUs,
 * their caches or memory bandwidth, and each runs as users run it: its threads (the JVM's
 * compilers, QEMU's I/O thread) free on every CPU. Measured with two identical plain 1000-round
 * jobs taking turns on one CPU: their CPU seconds differ by 0.4–0.6 %, where two started at once on the two
 * CPUs differed by up to 16 % and two runs one after the other by 35 %. (Pinning both to one CPU
 * as well cost QEMU's probed job 10–16 % more CPU than the same run unpinned, taking turns with it:
 * its vCPU and I/O threads then wait for each other. So the processes are not pinned; unpinned,
 * with a CI run beside them, two identical plain jobs taking turns came out 1.7 % and 0.05 % apart.)
 *
 * <p>A process that is not {@linkplain #run busy} (waiting for its next run, or ended) gives its
 * turns away: the one still busy runs alone.
 */
final class TakingTurns {
    /** A turn's length. */
    static final long TURN_MILLIS = 100;

    private static final int SIGCONT = 18, SIGSTOP = 19;   // Linux's numbers on x86-64 and arm64
    private static final MethodHandle KILL = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("kill").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));

    private final List<Process> processes = new ArrayList<>();
    private final List<Long> runNanos = new ArrayList<>();
    private int turn = -1;
    private long turnStart;

    /**
     * Ends the processes when this JVM ends before {@link #release} (a signal, Ctrl-C): a stopped
     * child would otherwise stay stopped for good, and a running one would go on alone.
     */
    private Thread onExit;

    /** Adds a started process; it is stopped until its first turn. Returns its index. */
    int add(Process p) {
        if (onExit == null) {
            List<Process> mine = processes;
            onExit = new Thread(() -> {
                for (Process q : mine) {
                    q.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
                    q.destroyForcibly();
                }
            }, "kpemu-turns-exit");
            Runtime.getRuntime().addShutdownHook(onExit);
        }
        processes.add(p);
        runNanos.add(0L);
        signal(p, SIGSTOP);
        return processes.size() - 1;
    }

    /**
     * Gives the turns for one turn's length: to the next busy process after the one that had the
     * last turn, the others stopped. With one busy process, that one runs; with none, nobody
     * runs. Call it again and again while the processes work (it returns after about
     * {@value #TURN_MILLIS} ms, or at once when nobody is busy).
     */
    void run(IntPredicate busy) throws InterruptedException {
        int next = -1;
        for (int k = 1; k <= processes.size(); k++) {
            int i = Math.floorMod(turn + k, processes.size());
            if (processes.get(i).isAlive() && busy.test(i)) {
                next = i;
                break;
            }
        }
        give(next);
        if (next >= 0) Thread.sleep(TURN_MILLIS);
    }

    /** Every process let go on (none stopped); the turn accounting closed. Call it when done, and on any failure. */
    void release() {
        give(-1);
        for (Process p : processes) signal(p, SIGCONT);
        if (onExit != null) {
            try {
                Runtime.getRuntime().removeShutdownHook(onExit);
            } catch (IllegalStateException e) {
                // this JVM is ending: the hook runs
            }
            onExit = null;
        }
    }

    /** Wall nanoseconds process {@code i} held the turn: its running time, the turns of the others left out. */
    long runNanos(int i) {
        return runNanos.get(i);
    }

    private void give(int next) {
        long now = System.nanoTime();
        if (turn >= 0) runNanos.set(turn, runNanos.get(turn) + now - turnStart);
        if (next != turn) {
            for (int i = 0; i < processes.size(); i++) if (i != next) signal(processes.get(i), SIGSTOP);
            if (next >= 0) signal(processes.get(next), SIGCONT);
        }
        turn = next;
        turnStart = now;
    }

    /** {@code sig} to the process and every process it started (a wrapper such as /usr/bin/time and the JVM or QEMU under it). */
    private static void signal(Process p, int sig) {
        List<ProcessHandle> tree = new ArrayList<>();
        tree.add(p.toHandle());
        p.toHandle().descendants().forEach(tree::add);
        for (ProcessHandle h : tree) {
            try {
                int rc = (int) KILL.invokeExact((int) h.pid(), sig);
                if (rc != 0 && h.isAlive()) throw new IllegalStateException("kill(" + h.pid() + ", " + sig + ") failed");
            } catch (RuntimeException | Error e) {
                throw e;
            } catch (Throwable t) {
                throw new IllegalStateException(t);
            }
        }
    }
}
