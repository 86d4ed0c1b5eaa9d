package dev.kpemu.boot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.image.Initramfs;
import dev.kpemu.machine.Arch;

/**
 * Debian unstable's 7.2 amd64 kernel (the decompressed vmlinux) boots the default workload to
 * power-off. Before SERIALIZE was emulated it panicked right after "Freeing unused decrypted
 * memory": a block translated before alternatives patched it still jumped into .altinstr_aux,
 * freed with the init text (docs/x86-boot-notes.md). The kernel comes from -Dkpemu.sidKernel or
 * {@code <cache>/guest/sid/x86_64/vmlinux}; without either the test is skipped (the suite's
 * fetching of Debian suites has to provide it).
 */
@Tag("kernel")
class X86SidBootKernelTest {
    static Path sidKernel() {
        String p = System.getProperty("kpemu.sidKernel");
        if (p != null && !p.isBlank()) return Path.of(p);
        String c = System.getProperty("kpemu.cache");
        if (c == null || c.isBlank()) c = System.getenv("KPEMU_CACHE");
        return c == null || c.isBlank() ? null : Path.of(c, "guest", "sid", "x86_64", "vmlinux");
    }

    @Test
    void sidKernelBootsPastFreeingInitMemoryToPowerOff() throws Exception {
        Path kernel = sidKernel();
        assumeTrue(kernel != null && Files.isRegularFile(kernel), "no sid x86_64 vmlinux (-Dkpemu.sidKernel or <cache>/guest/sid/x86_64/vmlinux)");
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(Arch.X86_64, kernel, null, null, 256, 30,
                console, new PrintStream(new ByteArrayOutputStream())));
        String log = console.toString(StandardCharsets.ISO_8859_1);
        assertEquals(BootRunner.EXIT_POWERED_OFF, r.exitCode(), r.status() + "\n" + String.join("\n", r.lastLines()));
        assertTrue(log.contains("Freeing unused kernel image (initmem) memory"), "init memory freed");
        assertTrue(log.contains(Initramfs.MARK_DONE), "init marker");
        assertTrue(log.contains("reboot: Power down"), "ACPI S5 power-off");
    }
}
