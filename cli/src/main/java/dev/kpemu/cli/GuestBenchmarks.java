package dev.kpemu.cli;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * The guest micro-benchmarks of {@code kpemu bench guest}: the static program
 * {@code guest-images/guest-bench/kbench.c} (built for the arch by
 * {@code guest-images/build-guest-bench.sh} into {@code .cache/guest-bench/ARCH/kbench}) and the
 * busybox loop of issue 13, in one initramfs per arch: kpemu's busybox guest with {@code /bin/kbench}
 * and an {@code /init} that runs the benchmarks the kernel command line names
 * ({@code kbench=NAME:N[,NAME:N…]}, one after the other), prints {@code kbench NAME N done} after
 * each and powers off. The same archive and command line boot under kpemu and under QEMU.
 */
public final class GuestBenchmarks {
    /** One benchmark: its name, the default iteration count, what one iteration does. */
    public record Benchmark(String name, long iterations, String description) {}

    public static final List<Benchmark> ALL = List.of(
            new Benchmark("syscall", 1_000_000, "getppid()"),
            new Benchmark("fault", 10_000, "mmap 16 anonymous pages, write one byte to each, munmap"),
            new Benchmark("yield", 100_000, "two processes, each sched_yield() (two context switches)"),
            new Benchmark("forkexec", 1_000, "fork, execve of a static program that exits, waitpid"),
            new Benchmark("pipe", 50_000, "a one-byte round trip between two processes over two pipes"),
            new Benchmark("fs", 20_000, "create a file in /tmp (tmpfs), write 4 KiB, read it back, unlink"),
            new Benchmark("busybox", 2_000, "busybox sh: cat /proc/version; echo to a file in /tmp; cat it (issue 13's loop)"));

    /** The benchmark called {@code name}, or an exception naming the known ones. */
    public static Benchmark named(String name) {
        return ALL.stream().filter(b -> b.name().equals(name)).findFirst().orElseThrow(() -> new IllegalArgumentException(
                "unknown guest benchmark '" + name + "' (" + String.join(", ", ALL.stream().map(Benchmark::name).toList()) + ")"));
    }

    /** The /init of the benchmark guest (busybox sh). */
    static final String INIT = """
            #!/bin/sh
            # kpemu bench guest: runs the benchmarks kbench=NAME:N[,NAME:N...] on the kernel command line
            export PATH=/bin
            mount -t proc proc /proc
            mount -t devtmpfs devtmpfs /dev
            mount -t tmpfs tmpfs /tmp
            specs=
            for w in $(cat /proc/cmdline); do case "$w" in kbench=*) specs=${w#kbench=} ;; esac; done
            IFS=,; set -- $specs; unset IFS
            for spec in "$@"; do
              name=${spec%%:*}; n=${spec#*:}
              if [ "$name" = busybox ]; then
                i=0
                while [ $i -lt $n ]; do
                  cat /proc/version >/dev/null; echo $i >/tmp/busybox.txt; cat /tmp/busybox.txt >/dev/null; i=$((i+1))
                done
                echo "kbench busybox $n done"
              else
                /bin/kbench "$name" "$n"
              fi
            done
            poweroff -f
            """;

    private GuestBenchmarks() {}

    /** The line the guest prints when benchmark {@code name} completed {@code n} iterations. */
    public static String doneLine(String name, long n) { return "kbench " + name + " " + n + " done"; }

    /** The kernel command-line word that runs {@code runs} (name to iterations, in order). */
    public static String commandLineWord(Map<String, Long> runs) {
        StringBuilder s = new StringBuilder("kbench=");
        runs.forEach((name, n) -> s.append(s.length() > 7 ? "," : "").append(name).append(':').append(n));
        return s.toString();
    }

    /** The kernel command line both machines get: the arch's console, nokaslr, panic=-1 and the benchmarks. */
    public static String commandLine(Arch arch, Map<String, Long> runs) {
        return (arch == Arch.X86_64 ? "console=ttyS0" : "console=ttyAMA0") + " nokaslr panic=-1 " + commandLineWord(runs);
    }

    /**
     * Builds (when its source changed) the arch's {@code kbench} and writes the benchmark
     * initramfs to {@code .cache/guest-bench/ARCH/guest.cpio}; returns the archive.
     */
    public static Path initramfs(Arch arch) throws KernelImageException, IOException {
        Path root = NativeLibraries.repositoryRoot();
        if (root == null) throw new KernelImageException("kpemu's repository (guest-images/build-guest-bench.sh) was not found; set -Dkpemu.root");
        GuestImages images = GuestImages.forRepository();
        Path dir = images.cacheRoot().resolve("guest-bench").resolve(arch.linuxName());
        Path program = dir.resolve("kbench");
        build(root, arch, program);
        Initramfs archive = Initramfs.defaultGuest(Files.readAllBytes(images.busybox(arch)));
        archive.file("bin/kbench", 0755, Files.readAllBytes(program));
        archive.file("init", 0755, INIT);
        return archive.write(dir.resolve("guest.cpio"));
    }

    private static void build(Path root, Arch arch, Path program) throws KernelImageException, IOException {
        Path script = root.resolve("guest-images/build-guest-bench.sh");
        Process p = new ProcessBuilder("bash", script.toString(), arch.linuxName(), program.toString()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        try {
            if (!p.waitFor(10, TimeUnit.MINUTES) || p.exitValue() != 0) {
                String last = out.isEmpty() ? "exit " + p.exitValue() : out.lines().reduce((a, b) -> b).orElse("");
                throw new KernelImageException("guest-images/build-guest-bench.sh " + arch.linuxName() + " failed: " + last);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KernelImageException("interrupted while building the guest benchmarks");
        }
    }
}
