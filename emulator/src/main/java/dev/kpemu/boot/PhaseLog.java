package dev.kpemu.boot;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Start-up timestamps for measuring where a run's time goes (docs/x86-boot-notes.md), off unless
 * the system property {@code kpemu.phases} is set ({@code KPEMU_JAVA_OPTS=-Dkpemu.phases}): each
 * {@link #mark} prints one line on standard error with the wall time since the JVM started, the
 * whole process's CPU time and the calling thread's; {@link #threads} prints every thread's CPU
 * time (Linux: from {@code /proc/self/task}), compiler and GC threads included, and the
 * process's peak and current resident memory ({@code /proc/self/status}).
 */
public final class PhaseLog {
    private static final boolean ON = System.getProperty("kpemu.phases") != null;

    private PhaseLog() {}

    public static boolean on() { return ON; }

    /** One line: {@code kpemu: phase NAME: wall W ms, process CPU P ms, thread CPU T ms, RSS R MiB (Java heap used H MiB)}. */
    public static void mark(String name) {
        if (!ON) return;
        var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        long wall = ManagementFactory.getRuntimeMXBean().getUptime();
        long process = os.getProcessCpuTime() / 1_000_000;
        long thread = ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime() / 1_000_000;
        System.err.printf("kpemu: phase %s: wall %d ms, process CPU %d ms, thread CPU %d ms, RSS %d MiB (Java heap used %d MiB)%n",
                name, wall, process, thread, residentKiB() >> 10,
                ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed() >> 20);
    }

    private static long residentKiB() {
        try {
            for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (l.startsWith("VmRSS:")) return Long.parseLong(l.replaceAll("[^0-9]", ""));
            }
        } catch (IOException | NumberFormatException e) {
            // not Linux
        }
        return -1;
    }

    /** Every thread's CPU time so far (user + system, ms), by the kernel's thread name. */
    public static void threads() {
        if (!ON) return;
        long tick = 10;   // USER_HZ 100 on Linux
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
            for (Path t : tasks) {
                String stat;
                try {
                    stat = Files.readString(t.resolve("stat"));
                } catch (IOException e) {
                    continue;   // the thread ended
                }
                int open = stat.indexOf('('), close = stat.lastIndexOf(')');
                String[] f = stat.substring(close + 2).split(" ");
                long cpu = (Long.parseLong(f[11]) + Long.parseLong(f[12])) * tick;   // utime, stime (fields 14, 15)
                if (cpu > 0) System.err.printf("kpemu: thread %s: CPU %d ms%n", stat.substring(open + 1, close), cpu);
            }
        } catch (IOException e) {
            System.err.println("kpemu: no per-thread times: " + e.getMessage());
        }
        try {
            for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (l.startsWith("VmHWM") || l.startsWith("VmRSS") || l.startsWith("Rss")) System.err.println("kpemu: memory " + l.replaceAll("\\s+", " "));
            }
        } catch (IOException e) {
            System.err.println("kpemu: no memory figures: " + e.getMessage());
        }
    }
}
