package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.*;

import dev.kpemu.machine.Arch;
import java.nio.file.Files;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Debian kernels by suite, from the machine's mirror (network on first use, then cached): both
 * package layouts — trixie's /boot files in linux-image-*, and unstable's linux-binary-* /
 * linux-base-* under /usr/lib/modules. Only fetching is checked here: whether kpemu boots them
 * is the boot tests' business.
 */
@Tag("kernel")
class DebianSuitesTest {
    @Test
    void trixieX86HasTheBootLayout() throws Exception {
        check(Arch.X86_64, "trixie", "boot");
    }

    @Test
    void unstableArm64HasTheModulesLayout() throws Exception {
        check(Arch.ARM64, "unstable", "modules");
    }

    private static void check(Arch arch, String suite, String layout) throws Exception {
        GuestImages g = GuestImages.forRepository();
        KernelChoice.Debian d = (KernelChoice.Debian) KernelChoice.parse("debian:" + suite);
        GuestImages.Guest guest = g.guest(arch, d);
        Map<String, String> v = guest.version();
        assertEquals(d.suite(), v.get("suite"), v.toString());
        assertEquals(layout, v.get("layout"), v.toString());
        assertTrue(v.get("package").equals("linux-image-" + v.get("release")), v.toString());
        assertTrue(v.get("release").endsWith("-" + GuestImages.debianName(arch)), v.toString());
        assertEquals(g.kernelDirectory(arch, d).resolve("vmlinuz"), guest.kernel());
        assertTrue(Files.size(guest.kernel()) > 1_000_000);
        assertTrue(Files.readString(g.config(arch, d)).contains("CONFIG_KALLSYMS=y"));
        assertEquals(g.directory(arch).resolve("initramfs.cpio"), guest.initramfs(), "one initramfs for every kernel");
        System.out.printf("%s %s: %s%n", suite, arch, v);
    }
}
