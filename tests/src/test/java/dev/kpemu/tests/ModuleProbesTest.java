package dev.kpemu.tests;

import dev.kpemu.image.RecordedKernels;
import static org.junit.jupiter.api.Assertions.assertEquals;
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
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.api.Assumptions;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.cli.GuestModules;
import dev.kpemu.session.TracedBoot;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.HostFiles;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceComparator;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;

/**
 * Probes on module functions ({@code MOD:SYM}), defined before the modules load, on Debian's own
 * modules loaded by {@code --modules}: brd and ext4 (with jbd2, mbcache, crc16 and crc32c as
 * ext4 asks), a RAM disk with a file system mounted, a file written and read. The trace equals
 * Linux's own for the same definitions, kernel and initramfs, recorded under QEMU by
 * {@code guest-images/record-reference.sh ARCH modules} (the probes are pending until the modules
 * load, then armed, and print {@code sym+off/size [module]}).
 */
@Tag("kernel")
class ModuleProbesTest {
    static final Path REFERENCE = KernelTraceRegressionTest.REFERENCE;

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("dev.kpemu.tests.KernelMatrixTest#kernels")
    void moduleProbesTraceAsLinuxDoes(String suite, Arch arch, @TempDir Path tmp) throws Exception {
        GuestImages images = GuestImages.forRepository();
        KernelChoice.Debian kernel = RecordedKernels.choice(suite);
        Map<String, String> v = images.kernelVersion(arch, kernel);
        Path ref = REFERENCE.resolve(arch.linuxName()).resolve(ReferenceTrace.series(v.get("release"))).resolve("modules.trace");
        Assumptions.assumeTrue(Files.isRegularFile(ref), "no modules reference recorded for " + v.get("release"));
        ReferenceTrace reference = ReferenceTrace.read(REFERENCE, arch, "modules", v.get("release"));
        Initramfs archive = Initramfs.defaultGuest(Files.readAllBytes(images.busybox(arch)));
        HostFiles.addExecutable(archive, REFERENCE.resolve("modules.init"), "init", arch);
        List<String> names = GuestModules.names(List.of(Files.readString(REFERENCE.resolve("modules.modules")).strip()));
        var loaded = GuestModules.install(archive, arch, kernel, names).stream().map(m -> m.name()).toList();
        assertEquals("brd", loaded.getFirst());
        assertEquals("ext4", loaded.getLast());
        assertTrue(loaded.containsAll(List.of("jbd2", "mbcache")), "ext4's dependencies (its .modinfo's depends=) load first: " + loaded);
        if (suite.equals("bookworm")) {
            assertEquals(List.of("brd", "crc32c_generic", "jbd2", "mbcache", "crc16", "ext4"), loaded,
                    "6.1's ext4: depends=jbd2,mbcache,crc16; softdep=pre: crypto-crc32c (modinfo)");
        }
        Path initrd = archive.write(tmp.resolve("modules.cpio"));

        TracedBoot traced = new TracedBoot(reference.definitions(), null);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, images.kernel(arch, kernel), initrd, null, 256, 60,
                console, new PrintStream(new ByteArrayOutputStream())), traced);
        String log = console.toString(StandardCharsets.ISO_8859_1);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + log);
        assertTrue(log.contains("hello from ext4"), "the file system was mounted and the file read back:\n" + log);
        List<String> lines = new ArrayList<>(traced.records().stream().map(TraceRecord::line).toList());
        TraceComparator.Result cmp = TraceComparator.compare(reference, lines, v.get("release"), v.get("version"));
        assertTrue(cmp.matches(), suite + " " + arch + ": " + cmp.report());
        assertTrue(cmp.expectedEvents() > 20, "the workload hits the probes: " + cmp.expectedEvents());
        assertTrue(lines.stream().anyMatch(l -> l.contains("[ext4]")), "module symbols print with [module]");
    }

    /**
     * The virtme-ng workflow with modules: {@code boot --modules brd,ext4 -- CMD} loads them before
     * the command, the command makes and mounts an ext4 file system, kpemu exits with the
     * command's status and the probe on the module function fires for the command's processes.
     */
    @org.junit.jupiter.api.Test
    void modulesUnderACommandInTheGuest() {
        KpemuInProcess.Run r = KpemuInProcess.kpemu("boot", "--arch", "x86_64", "--modules", "brd,ext4",
                "-e", "p:ext4/open ext4:ext4_file_open comm=$comm", "--",
                "sh", "-c", "mke2fs -q /dev/ram0 1024 >/dev/null && mkdir -p /mnt && mount -t ext4 /dev/ram0 /mnt"
                        + " && echo hi > /mnt/f && cat /mnt/f; umount /mnt; exit 3");
        assertEquals(3, r.code(), r.err());
        assertTrue(r.err().lines().anyMatch(l -> l.equals("hi")), r.err());
        assertTrue(r.out().lines().anyMatch(l -> l.contains(" open: (ext4_file_open+0x0/") && l.contains(" [ext4]) comm=\"cat\"")), r.out());
    }
}
