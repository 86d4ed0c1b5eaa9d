package dev.kpemu.cli;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.HostFiles;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * {@code kpemu bench smp}: several guest CPUs (issue 26) on kpemu and on QEMU TCG {@code -smp N},
 * the same kernel, initramfs, command line and RAM, as whole processes (wall, user + system CPU,
 * peak RSS: {@link GuestBench#measure}). The guest is the "smp" reference script's
 * ({@code guest-images/reference/smp.init}): one task pinned to each CPU, each reading
 * {@code /proc/version} {@code ROUNDS} times at once. Per N two rows and machines:
 * <ul>
 * <li>{@code boot}: 0 rounds, no probes — boot to power-off with N CPUs;</li>
 * <li>{@code plain}: {@code ROUNDS} rounds, no probes — the work itself;</li>
 * <li>{@code probed}: {@code ROUNDS} rounds under the script's three probes (a kprobe at
 * {@code version_proc_show}'s entry, one inside it, a kretprobe: three hits a round): kpemu's with
 * {@code -e} (its trace lines written to a discarded stdout), QEMU's Linux's own, given on the kernel
 * command line ({@code kprobe_event=}, {@code trace_event=}) into tracefs' ring buffer.</li>
 * </ul>
 * The paper's Figure 4 for each machine: probe hits per second of guest work, {@code 3 × N × ROUNDS}
 * over the probed row's time minus the boot row's, against N; and each hit's cost, the probed row's
 * CPU time minus the plain row's over the hits. Runs go round robin and alternate the
 * machine that starts, so a loaded host stretches both alike: read the ratios.
 */
final class SmpBench {
    /** One row: N CPUs, {@code boot} (0 rounds, no probes) or {@code probed}, each machine's samples. */
    record Row(int cpus, String name, long rounds, boolean probed, Map<GuestBench.Machine, List<GuestBench.Sample>> samples) {
        long medianWall(GuestBench.Machine m) { return GuestBench.median(samples.get(m).stream().mapToLong(GuestBench.Sample::wallNanos).toArray()); }
        long medianCpu(GuestBench.Machine m) { return GuestBench.median(samples.get(m).stream().mapToLong(GuestBench.Sample::cpuNanos).toArray()); }
        long medianPeakKib(GuestBench.Machine m) { return GuestBench.median(samples.get(m).stream().mapToLong(GuestBench.Sample::peakKib).toArray()); }
    }

    record Result(Arch arch, String release, List<Row> rows) {}

    static final List<Integer> CPUS = List.of(1, 2, 4);
    static final long ROUNDS = 2000;

    private SmpBench() {}

    static Result run(Arch arch, List<Integer> cpuCounts, long rounds, int repeat, PrintStream progress) throws KernelImageException, IOException {
        Path root = NativeLibraries.repositoryRoot();
        if (root == null) throw new KernelImageException("kpemu's repository (guest-images/reference/smp.init) was not found; set -Dkpemu.root");
        ReferenceQemu.require(root, arch);
        GuestImages images = GuestImages.forRepository();
        GuestImages.Guest guest = images.guest(arch);
        Path dir = Files.createDirectories(images.cacheRoot().resolve("smp-bench").resolve(arch.linuxName()));
        Initramfs archive = Initramfs.defaultGuest(Files.readAllBytes(images.busybox(arch)));
        HostFiles.addExecutable(archive, root.resolve("guest-images/reference/smp.init"), "init", arch);
        Path initramfs = archive.write(dir.resolve("smp.cpio"));
        List<String> definitions = Files.readAllLines(root.resolve("guest-images/reference/smp." + arch.linuxName() + ".events")).stream()
                .map(l -> l.replaceAll("#.*", "").strip()).filter(l -> !l.isEmpty()).toList();
        Path qemuKernel = arch == Arch.X86_64 ? images.vmlinux(arch) : guest.kernel();

        List<Row> rows = new ArrayList<>();
        for (int n : cpuCounts) {
            rows.add(new Row(n, "boot", 0, false, samples()));
            rows.add(new Row(n, "plain", rounds, false, samples()));
            rows.add(new Row(n, "probed", rounds, true, samples()));
        }
        for (int round = 0; round < repeat; round++) {
            List<GuestBench.Machine> order = round % 2 == 0 ? List.of(GuestBench.Machine.KPEMU, GuestBench.Machine.QEMU)
                    : List.of(GuestBench.Machine.QEMU, GuestBench.Machine.KPEMU);
            for (Row row : rows) {
                boolean probed = row.probed();
                String cmdline = (arch == Arch.X86_64 ? "console=ttyS0" : "console=ttyAMA0") + " nokaslr panic=-1 smp_rounds=" + row.rounds();
                for (GuestBench.Machine m : order) {
                    progress.printf("kpemu bench smp: %s round %d of %d: %s, %d CPU(s), %s%n", arch.linuxName(), round + 1, repeat,
                            m == GuestBench.Machine.KPEMU ? "kpemu" : "QEMU", row.cpus(), row.name() + " " + row.rounds() + " rounds");
                    Path log = dir.resolve((m == GuestBench.Machine.KPEMU ? "kpemu-" : "qemu-") + row.cpus() + "-" + row.name() + ".log");
                    List<String> cmd = m == GuestBench.Machine.KPEMU
                            ? kpemu(arch, initramfs, cmdline, row.cpus(), probed ? definitions : List.of(), log)
                            : qemu(arch, qemuKernel, initramfs, probed ? cmdline + " " + linuxProbes(definitions) : cmdline, row.cpus());
                    row.samples().get(m).add(GuestBench.measure(cmd, log,
                            List.of("KPEMU-INIT-START cpus=" + row.cpus() + " ", "KPEMU-SMP-WORK-DONE"),
                            m == GuestBench.Machine.KPEMU ? "kpemu" : "QEMU", arch));
                }
            }
        }
        return new Result(arch, guest.release(), rows);
    }

    /** The definitions as Linux's kernel command line takes them: {@code kprobe_event=} and {@code trace_event=}. */
    static String linuxProbes(List<String> definitions) {
        List<String> kp = new ArrayList<>(), ev = new ArrayList<>();
        for (String d : definitions) {
            String head = d.split("\\s+")[0];
            String event = head.substring(head.indexOf(':') + 1);
            ev.add(event.contains("/") ? event.replace('/', ':') : "kprobes:" + event);
            kp.add(String.join(",", d.split("\\s+")));
        }
        return "kprobe_event=" + String.join(";", kp) + " trace_event=" + String.join(",", ev);
    }

    private static Map<GuestBench.Machine, List<GuestBench.Sample>> samples() {
        Map<GuestBench.Machine, List<GuestBench.Sample>> s = new EnumMap<>(GuestBench.Machine.class);
        for (GuestBench.Machine m : GuestBench.Machine.values()) s.put(m, new ArrayList<>());
        return s;
    }

    /** kpemu as the launcher starts it, with N vCPUs (x86-64: the board with the reference machine's APICs, for every N). */
    private static List<String> kpemu(Arch arch, Path initramfs, String cmdline, int cpus, List<String> definitions, Path console) {
        List<String> c = GuestBench.java(LauncherBootOptions.forChildren());
        c.addAll(List.of("boot", "--arch", arch.linuxName(), "--initrd", initramfs.toString(), "--append", cmdline,
                "--memory", Integer.toString(GuestBench.MEMORY_MIB), "--timeout", "3600", "--console", console.toString(),
                "--cpus", Integer.toString(cpus)));
        if (arch == Arch.X86_64) c.add("--x86-apic");
        for (String d : definitions) c.addAll(List.of("-e", d));
        return c;
    }

    /** QEMU TCG {@code -smp N} as guest-images/qemu-reference.sh runs it. */
    private static List<String> qemu(Arch arch, Path kernel, Path initramfs, String cmdline, int cpus) {
        List<String> c = new ArrayList<>(ReferenceQemu.machine(arch));
        c.addAll(List.of("-m", Integer.toString(GuestBench.MEMORY_MIB), "-smp", Integer.toString(cpus), "-nographic", "-no-reboot",
                "-kernel", kernel.toString(), "-initrd", initramfs.toString(), "-append", cmdline));
        return c;
    }
}
