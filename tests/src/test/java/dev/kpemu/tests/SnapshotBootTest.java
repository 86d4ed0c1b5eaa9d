package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.BootSnapshot;
import dev.kpemu.cli.ExitCodes;
import dev.kpemu.session.TracedBoot;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceComparator;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.snapshot.MachineSnapshot;

/**
 * Machine snapshots on Debian 12's kernel: a boot that saves its machine at run_init_process, a
 * boot restored from that file and a cold boot without a snapshot (probes registered there in
 * all three) are the same run, byte for byte in trace and console and to the instruction, on
 * both arches, and the restored boot's trace equals Linux's own ({@code open}, recorded under QEMU). A damaged snapshot is refused in one
 * line ({@code --snapshot-file}) or replaced by a cold boot (the automatic cache).
 */
@Tag("kernel")
class SnapshotBootTest {
    static final String SUITE = "bookworm";

    record Run(BootRunner.Result result, List<String> trace, String console, List<String> notices) {}

    static Run boot(Arch arch, Path kernel, List<String> definitions, Path snapshot) throws Exception {
        TracedBoot traced = new TracedBoot(definitions, null).armAtInit(true);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        List<String> notices = new ArrayList<>();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, kernel, null, null, 256, 60, console,
                new PrintStream(new ByteArrayOutputStream())), traced, snapshot == null ? null : BootSnapshot.file(snapshot, notices::add));
        return new Run(r, traced.records().stream().map(TraceRecord::line).toList(), console.toString(StandardCharsets.ISO_8859_1), notices);
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void coldSavingAndRestoredBootsAreOneRunAndTraceAsLinux(Arch arch) throws Exception {
        Map<String, String> v = KernelMatrixTest.version(SUITE, arch);
        ReferenceTrace reference = ReferenceTrace.read(KernelTraceRegressionTest.REFERENCE, arch, "open", v.get("release"));
        Path kernel = KernelMatrixTest.kernel(SUITE, arch);
        Path dir = Files.createTempDirectory("kpemu-snapshot");
        Path file = dir.resolve("boot.snapshot");
        try {
            Run cold = boot(arch, kernel, reference.definitions(), null);
            Run saving = boot(arch, kernel, reference.definitions(), file);
            Run restored = boot(arch, kernel, reference.definitions(), file);
            assertEquals(BootOutcome.POWERED_OFF, cold.result().outcome(), cold.result().status());
            assertEquals(BootOutcome.POWERED_OFF, saving.result().outcome(), saving.result().status());
            assertEquals(BootOutcome.POWERED_OFF, restored.result().outcome(), restored.result().status());
            assertNotNull(saving.result().snapshot());
            assertFalse(saving.result().snapshot().restored(), "the first boot is cold and saves: " + saving.notices());
            assertEquals(file, saving.result().snapshot().file(), "saved: " + saving.notices());
            assertTrue(restored.result().snapshot().restored(), "the second boot starts from the file: " + restored.notices());

            // the restored guest ran only from /init on: its console is the end of the saving boot's
            assertTrue(restored.console().contains("Run /init") && restored.console().contains(Initramfs.MARK_DONE), restored.console());
            assertTrue(saving.console().length() > restored.console().length() + 10_000, "the kernel's boot log is not printed again");
            assertTrue(saving.console().endsWith(restored.console()), "console from the snapshot point on");
            assertTrue(restored.trace().size() > 20, "the workload hits the probes: " + restored.trace().size());
            assertEquals(saving.trace(), restored.trace(), "trace lines, timestamps included");
            assertEquals(saving.result().instructions(), restored.result().instructions(), "instructions to power-off");
            assertEquals(saving.result().guestNanos(), restored.result().guestNanos(), "guest time at power-off");
            assertEquals(saving.result().interrupts(), restored.result().interrupts(), "interrupts taken");
            // a cold boot without a snapshot, probes registered at the same point, is the same run
            assertEquals(cold.trace(), restored.trace(), "the cold boot's trace, timestamps included");
            assertEquals(cold.console(), saving.console(), "the cold boot's console");
            assertEquals(cold.result().instructions(), restored.result().instructions(), "the cold boot's instructions");

            TraceComparator.Result cmp = TraceComparator.compare(reference, restored.trace(), v.get("release"), v.get("version"));
            assertTrue(cmp.matches(), arch + ": " + cmp.report());
            assertTrue(cmp.expectedEvents() > 20, "events compared: " + cmp.expectedEvents());
        } finally {
            Files.deleteIfExists(file);
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void damagedSnapshotFileIsRefusedInOneLine() throws Exception {
        Path dir = Files.createTempDirectory("kpemu-snapshot");
        Path file = dir.resolve("damaged.snapshot");
        try {
            Files.writeString(file, "KPEMU-SNAPSHOT\nthis is not what kpemu wrote");
            KpemuInProcess.Run r = KpemuInProcess.kpemu("boot", "--arch", "x86_64", "--console", "/dev/null", "--snapshot-file", file.toString());
            assertEquals(ExitCodes.SNAPSHOT_REFUSED, r.code(), r.err());
            List<String> lines = r.err().lines().filter(l -> l.contains("snapshot")).toList();
            assertEquals(1, lines.size(), r.err());
            assertTrue(lines.get(0).startsWith("kpemu: snapshot " + file), lines.get(0));
            assertFalse(r.err().contains("Exception"), r.err());
        } finally {
            Files.deleteIfExists(file);
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void automaticCacheReplacesADamagedSnapshotWithACold() throws Exception {
        GuestImages images = GuestImages.forRepository();
        Arch arch = Arch.X86_64;
        Path kernel = images.kernel(arch), initrd = images.initramfs(arch);
        BootRunner.Options o = new BootRunner.Options(arch, kernel, initrd, null, 256, 60, null, null);
        BootSnapshot cache = BootSnapshot.cache(images.cacheRoot().resolve("snapshots"), null);
        Path file = cache.fileFor(BootSnapshot.identity(o, kernel, Files.readAllBytes(initrd)));
        Files.createDirectories(file.getParent());
        try {
            Files.write(file, new byte[] {'K', 'P', 'E', 'M', 'U'});       // truncated
            KpemuInProcess.Run r = KpemuInProcess.kpemu("boot", "--arch", "x86_64", "--console", "/dev/null", "--snapshot");
            assertEquals(ExitCodes.OK, r.code(), r.err());
            assertTrue(r.err().contains("kpemu: snapshot " + file + " is not a kpemu snapshot (too short); booting cold"), r.err());
            assertTrue(r.err().contains("kpemu: saved snapshot " + file), r.err());
            assertEquals(arch.name(), MachineSnapshot.identity(file).get("arch"), "a good snapshot replaced the damaged one");
        } finally {
            Files.deleteIfExists(file);
        }
    }
}
