package dev.kpemu.cli;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.BootSnapshot;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.snapshot.SnapshotException;
import dev.kpemu.session.TracedBoot;

/**
 * {@code kpemu bench snapshot}: a probe session on Debian's default kernel and kpemu's initramfs
 * (an entry and a return probe on {@code do_sys_openat2}, registered at run_init_process), started
 * cold and started from a snapshot taken there, to power-off, in one process. The snapshot is
 * saved by a first, cold boot (also warming the JIT); then cold and restored boots alternate
 * {@code repeat} times and the least of each is kept. Host wall time and the process's CPU time
 * (all threads) of {@code BootRunner.boot}, kernel preparation and restore included; the ratio
 * restored / cold is the figure (a loaded machine stretches seconds, less so ratios); guest
 * instructions show both runs reach the same end.
 */
final class SnapshotBench {
    static final List<String> DEFINITIONS = List.of("p:bench_open do_sys_openat2", "r:bench_open_ret do_sys_openat2 ret=$retval");

    /** One kind of start: its guest instructions to power-off, the least wall and CPU time, the events. */
    record Row(Arch arch, String label, long instructions, long wallNanos, long cpuNanos, long events, int exitCode) {}

    /** Cold, restored, and the snapshot's size. */
    record Result(Arch arch, Row cold, Row restored, long snapshotBytes, long ramPages) {}

    private SnapshotBench() {}

    static Result run(Arch arch, int repeat, PrintStream progress) throws KernelImageException, SnapshotException, IOException {
        Path dir = Files.createTempDirectory("kpemu-bench-snapshot");
        Path file = dir.resolve("boot.snapshot");
        try {
            progress.printf("kpemu bench snapshot: %s cold boot saving the snapshot%n", arch.linuxName());
            Row saving = boot(arch, "cold, saving the snapshot", BootSnapshot.file(file, s -> { }));
            BootRunner.Result last = lastResult;
            long bytes = last.snapshot() == null ? -1 : last.snapshot().bytes();
            long pages = last.snapshot() == null ? -1 : last.snapshot().ramPages();
            if (last.snapshot() == null || last.snapshot().file() == null) throw new IOException("the snapshot was not saved");
            Row cold = null, restored = null;
            for (int i = 0; i < repeat; i++) {
                progress.printf("kpemu bench snapshot: %s round %d of %d%n", arch.linuxName(), i + 1, repeat);
                cold = least(cold, boot(arch, "cold", null));
                restored = least(restored, boot(arch, "from the snapshot", BootSnapshot.file(file, s -> { })));
                if (!lastResult.snapshot().restored()) throw new IOException("the boot did not start from the snapshot");
            }
            if (saving.instructions() != restored.instructions()) {
                progress.printf("kpemu bench snapshot: %s: the restored boot ran %d instructions, the saving boot %d%n",
                        arch.linuxName(), restored.instructions(), saving.instructions());
            }
            return new Result(arch, cold, restored, bytes, pages);
        } finally {
            Files.deleteIfExists(file);
            Files.deleteIfExists(dir);
        }
    }

    private static BootRunner.Result lastResult;

    private static Row least(Row a, Row b) {
        if (a == null) return b;
        return new Row(a.arch(), a.label(), b.instructions(), Math.min(a.wallNanos(), b.wallNanos()), Math.min(a.cpuNanos(), b.cpuNanos()),
                b.events(), a.exitCode() != 0 ? a.exitCode() : b.exitCode());
    }

    private static Row boot(Arch arch, String label, BootSnapshot snapshot) throws KernelImageException, SnapshotException {
        TracedBoot traced = new TracedBoot(DEFINITIONS, null).armAtInit(true).keepRecords(false).kernelMessages(s -> { });
        OutputStream sink = OutputStream.nullOutputStream();
        long cpu0 = processCpuNanos(), t0 = System.nanoTime();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, null, null, null, 256, 60, sink,
                new PrintStream(new ByteArrayOutputStream())), traced, snapshot);
        long wall = System.nanoTime() - t0, cpu = processCpuNanos() - cpu0;
        lastResult = r;
        return new Row(arch, label, r.instructions(), wall, cpu, traced.eventCount(), ExitCodes.of(r.outcome()));
    }

    private static long processCpuNanos() {
        return ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os ? os.getProcessCpuTime() : 0;
    }
}
