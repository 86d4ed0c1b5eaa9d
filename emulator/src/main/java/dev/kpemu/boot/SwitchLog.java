package dev.kpemu.boot;

import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Machine;

import java.io.IOException;
import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * A host-side sampler of a several-vCPU boot (issue 30, docs/smp-notes.md "Where the time of
 * several CPUs goes"): at every switch of vCPUs, the guest instruction count, the incoming vCPU and
 * its PC, which is where that vCPU's previous quantum ended, and the run thread's CPU time. Kept in memory (four
 * longs a switch) and written, symbolized, when the boot ends: one line
 * {@code instructions cpu pc symbol+off thread-CPU-nanoseconds-since-the-first-switch} a switch, and a last line {@code # switches N, quanta ended by spin waits M}. Enabled by the system property {@code kpemu.switchLog=FILE} (e.g. through
 * {@code KPEMU_JAVA_OPTS}); it changes nothing in the run.
 */
final class SwitchLog implements Machine.SwitchObserver {
    /** The system property naming the file; unset: no log. */
    static final String PROPERTY = "kpemu.switchLog";

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    private final Machine machine;
    private long[] rows = new long[4 * 4096];
    private int used;

    private SwitchLog(Machine machine) {
        this.machine = machine;
    }

    /** A log observing {@code m}'s switches when {@link #PROPERTY} is set, else null. */
    static SwitchLog attachIfRequested(Machine m) {
        if (System.getProperty(PROPERTY) == null || m.cpuCount() < 2) return null;
        SwitchLog log = new SwitchLog(m);
        m.setSwitchObserver(log);
        return log;
    }

    @Override
    public void switchedTo(int cpu, long pc, long quantum) {
        if (used + 4 > rows.length) rows = Arrays.copyOf(rows, rows.length * 2);
        rows[used++] = machine.clock().instructions();
        rows[used++] = cpu;
        rows[used++] = pc;
        rows[used++] = THREADS.getCurrentThreadCpuTime();
    }

    /** Writes the log to the property's file, symbolized with {@code symbols}; a failure is a one-line notice. */
    void write(SymbolTable symbols) {
        Path file = Path.of(System.getProperty(PROPERTY));
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(file))) {
            for (int i = 0; i < used; i += 4) {
                out.printf("%d %d %x %s %d%n", rows[i], rows[i + 1], rows[i + 2], symbols.format(rows[i + 2]), rows[i + 3] - rows[3]);
            }
            out.printf("# switches %d, quanta ended by spin waits %d%n", machine.cpuSwitches(), machine.quantumYields());
        } catch (IOException e) {
            System.err.println("kpemu: could not write the switch log " + file + ": " + e.getMessage());
        }
    }
}
