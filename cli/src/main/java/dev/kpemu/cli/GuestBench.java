package dev.kpemu.cli;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * {@code kpemu bench guest}: each guest micro-benchmark ({@link GuestBenchmarks}) on kpemu and on
 * QEMU TCG, the reference machine, with the same kernel (kpemu: Debian's file; QEMU: the same
 * build, x86_64's vmlinux through PVH as scripts/compare-boot-time.sh boots it), the same
 * initramfs, the same command line and 256 MiB of RAM, each a whole process from start to the
 * guest's power-off under {@code /usr/bin/time} (wall from this process, user + system CPU and
 * peak RSS of the child). A benchmark's cost on a machine is the median of its boots minus the
 * median of that machine's boots running every benchmark for 0 iterations; kpemu's guest clock is
 * virtual, so host time is the one both machines share. Each benchmark's two processes run side
 * by side, taking turns ({@link TakingTurns}), so a host whose speed drifts stretches
 * both alike; read the ratios kpemu / QEMU, not the seconds. Wall time is the time each held the turn.
 */
final class GuestBench {
    enum Machine { KPEMU, QEMU }

    /** One whole process: wall, user + system CPU, peak resident set. */
    record Sample(long wallNanos, long cpuNanos, long peakKib) {}

    /** One row: a benchmark with its iterations (the boot row: {@code boot}, 0), each machine's samples. */
    record Row(String name, long iterations, Map<Machine, List<Sample>> samples) {
        long medianWall(Machine m) { return median(samples.get(m).stream().mapToLong(Sample::wallNanos).toArray()); }
        long medianCpu(Machine m) { return median(samples.get(m).stream().mapToLong(Sample::cpuNanos).toArray()); }
        long medianPeakKib(Machine m) { return median(samples.get(m).stream().mapToLong(Sample::peakKib).toArray()); }
    }

    record Result(Arch arch, String release, Row boot, List<Row> rows) {}

    static final String BOOT = "boot";
    static final int MEMORY_MIB = 256;

    private GuestBench() {}

    static Result run(Arch arch, Map<String, Long> benchmarks, int repeat, PrintStream progress) throws KernelImageException, IOException {
        ReferenceQemu.require(NativeLibraries.repositoryRoot(), arch);
        progress.printf("kpemu bench guest: %s: building the benchmark guest%n", arch.linuxName());
        Path initramfs = GuestBenchmarks.initramfs(arch);
        GuestImages images = GuestImages.forRepository();
        GuestImages.Guest guest = images.guest(arch);
        Path qemuKernel = arch == Arch.X86_64 ? images.vmlinux(arch) : guest.kernel();
        Path logs = Files.createDirectories(images.cacheRoot().resolve("guest-bench").resolve(arch.linuxName()).resolve("logs"));

        Map<String, Long> zero = new LinkedHashMap<>();
        benchmarks.keySet().forEach(n -> zero.put(n, 0L));
        Row boot = new Row(BOOT, 0, samples());
        List<Row> rows = new ArrayList<>();
        benchmarks.forEach((n, it) -> rows.add(new Row(n, it, samples())));
        for (int round = 0; round < repeat; round++) {
            List<Machine> order = round % 2 == 0 ? List.of(Machine.KPEMU, Machine.QEMU) : List.of(Machine.QEMU, Machine.KPEMU);
            List<Row> all = new ArrayList<>(rows);
            all.addFirst(boot);
            for (Row row : all) {
                Map<String, Long> runs = row == boot ? zero : Map.of(row.name(), row.iterations());
                String cmdline = GuestBenchmarks.commandLine(arch, runs);
                List<Launch> launches = new ArrayList<>();
                for (Machine m : order) {
                    Path log = logs.resolve((m == Machine.KPEMU ? "kpemu-" : "qemu-") + row.name() + ".log");
                    List<String> cmd = m == Machine.KPEMU ? kpemu(arch, initramfs, cmdline, log) : qemu(arch, qemuKernel, initramfs, cmdline);
                    launches.add(new Launch(cmd, log, runs.entrySet().stream().map(e -> GuestBenchmarks.doneLine(e.getKey(), e.getValue())).toList(),
                            m == Machine.KPEMU ? "kpemu" : "QEMU", arch));
                }
                progress.printf("kpemu bench guest: %s round %d of %d: kpemu and QEMU %s, taking turns%n", arch.linuxName(), round + 1, repeat,
                        row == boot ? "boot (0 iterations)" : row.name() + " " + row.iterations());
                List<Sample> samples = measure(launches, true);
                for (int i = 0; i < order.size(); i++) row.samples().get(order.get(i)).add(samples.get(i));
            }
        }
        return new Result(arch, guest.release(), boot, rows);
    }

    private static Map<Machine, List<Sample>> samples() {
        Map<Machine, List<Sample>> s = new EnumMap<>(Machine.class);
        for (Machine m : Machine.values()) s.put(m, new ArrayList<>());
        return s;
    }

    /**
     * kpemu as the launcher starts {@code kpemu boot}: this JVM's java and class path, the launcher's
     * options for boot ({@link LauncherBootOptions}), the CLI's boot.
     */
    static List<String> kpemu(Arch arch, Path initramfs, String cmdline, Path console) {
        List<String> c = java(LauncherBootOptions.forChildren());
        c.addAll(List.of("boot", "--arch", arch.linuxName(), "--initrd", initramfs.toString(), "--append", cmdline,
                "--memory", Integer.toString(MEMORY_MIB), "--timeout", "3600", "--console", console.toString()));
        return c;
    }

    /** {@code java OPTIONS -cp CLASSPATH dev.kpemu.cli.Main}: this JVM's java and class path with {@code options}. */
    static List<String> java(List<String> options) {
        return java(options, Main.class);
    }

    /** {@code java OPTIONS -cp CLASSPATH MAIN}: this JVM's java and class path with {@code options}, {@code main} the main class. */
    static List<String> java(List<String> options, Class<?> main) {
        List<String> c = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        c.addAll(options);
        c.addAll(List.of("-cp", System.getProperty("java.class.path"), main.getName()));
        return c;
    }

    /** QEMU TCG as scripts/compare-boot-time.sh and guest-images/qemu-reference.sh run it. */
    static List<String> qemu(Arch arch, Path kernel, Path initramfs, String cmdline) {
        List<String> c = new ArrayList<>(ReferenceQemu.machine(arch));
        c.addAll(List.of("-m", Integer.toString(MEMORY_MIB), "-nographic", "-no-reboot", "-kernel", kernel.toString(),
                "-initrd", initramfs.toString(), "-append", cmdline));
        return c;
    }

    /** One process to measure: its command, its console log, the lines its guest must print, its machine's name ("kpemu", "QEMU"). */
    record Launch(List<String> cmd, Path log, List<String> doneLines, String machine, Arch arch) {}

    /** Runs {@code cmd} under /usr/bin/time; the guest's console must hold each of {@code doneLines}. */
    static Sample measure(List<String> cmd, Path log, List<String> doneLines, String machine, Arch arch) throws IOException {
        return measure(List.of(new Launch(cmd, log, doneLines, machine, arch)), false).getFirst();
    }

    /**
     * Runs the launches under /usr/bin/time, side by side taking turns ({@link TakingTurns}) when
     * {@code turns}, else one after the other. The wall time of a launch that
     * took turns is the time it held them. Each guest's console must hold its {@code doneLines}.
     */
    static List<Sample> measure(List<Launch> launches, boolean turns) throws IOException {
        if (!turns && launches.size() > 1) {
            List<Sample> out = new ArrayList<>();
            for (Launch l : launches) out.add(measure(List.of(l), false).getFirst());
            return out;
        }
        List<Path> times = new ArrayList<>();
        List<Process> started = new ArrayList<>();
        TakingTurns taking = turns ? new TakingTurns() : null;
        try {
            long t0 = System.nanoTime();
            for (Launch l : launches) {
                Path t = Files.createTempFile("kpemu-bench-guest", ".time");
                times.add(t);
                List<String> timed = new ArrayList<>(List.of("/usr/bin/time", "-f", "%U %S %M", "-o", t.toString()));
                timed.addAll(l.cmd());
                Files.deleteIfExists(l.log());
                ProcessBuilder pb = new ProcessBuilder(timed)
                        .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
                if (l.machine().equals("kpemu")) pb.redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(ProcessBuilder.Redirect.DISCARD);
                else pb.redirectErrorStream(true).redirectOutput(l.log().toFile());
                Process p = pb.start();
                started.add(p);
                if (taking != null) taking.add(p);
            }
            long deadline = t0 + TimeUnit.HOURS.toNanos(2);
            try {
                if (taking != null) {
                    while (started.stream().anyMatch(Process::isAlive) && System.nanoTime() < deadline) taking.run(i -> true);
                    taking.release();
                }
                for (Process p : started) p.waitFor(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted");
            }
            long wall = System.nanoTime() - t0;
            List<Sample> out = new ArrayList<>();
            for (int i = 0; i < launches.size(); i++) {
                Launch l = launches.get(i);
                Process p = started.get(i);
                if (p.isAlive()) throw new IOException(l.machine() + " " + l.arch().linuxName() + " did not finish in 2 hours; see " + l.log());
                String console = Files.exists(l.log()) ? Files.readString(l.log(), StandardCharsets.ISO_8859_1) : "";
                for (String done : l.doneLines()) {
                    if (!console.contains(done)) {
                        throw new IOException(l.machine() + " " + l.arch().linuxName() + ": the guest did not print '" + done + "' (exit "
                                + p.exitValue() + "); its console: " + l.log());
                    }
                }
                String[] f = Files.readString(times.get(i)).strip().lines().reduce((x, y) -> y).orElse("").split(" ");
                if (f.length != 3) throw new IOException("/usr/bin/time wrote no figures for " + l.machine() + " " + l.arch().linuxName());
                long cpu = Math.round((Double.parseDouble(f[0]) + Double.parseDouble(f[1])) * 1e9);
                out.add(new Sample(taking != null ? taking.runNanos(i) : wall, cpu, Long.parseLong(f[2])));
            }
            return out;
        } finally {
            if (taking != null) taking.release();
            for (Process p : started) if (p.isAlive()) p.destroyForcibly();
            for (Path t : times) Files.deleteIfExists(t);
        }
    }

    static long median(long[] v) {
        long[] s = v.clone();
        java.util.Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
