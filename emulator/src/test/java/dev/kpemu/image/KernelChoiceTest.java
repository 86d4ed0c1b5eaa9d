package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.*;

import dev.kpemu.machine.Arch;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code --kernel} values and the per-suite cache layout, without network. */
class KernelChoiceTest {
    @Test
    void debianChoices() {
        assertSame(KernelChoice.DEFAULT, KernelChoice.parse("debian"));
        assertEquals(new KernelChoice.Debian("trixie"), KernelChoice.parse("debian:trixie"));
        assertEquals("sid", ((KernelChoice.Debian) KernelChoice.parse("debian:unstable")).suite(), "unstable is sid");
        assertEquals("sid", ((KernelChoice.Debian) KernelChoice.parse("debian:sid")).suite());
        assertEquals("bookworm-backports", ((KernelChoice.Debian) KernelChoice.parse("debian:bookworm-backports")).suite());
        assertEquals("debian:trixie-backports", KernelChoice.parse("debian:trixie-backports").toString());
        assertEquals("trixie", new KernelChoice.Debian(null).suiteOr("trixie"), "debian alone is the machine's suite");
    }

    /** One build of a suite's kernel, by the release uname -r prints. */
    @Test
    void debianBuildsByRelease() {
        KernelChoice.Debian d = (KernelChoice.Debian) KernelChoice.parse("debian:trixie@6.12.117+deb13");
        assertEquals(new KernelChoice.Debian("trixie", "6.12.117+deb13"), d);
        assertEquals("debian:trixie@6.12.117+deb13", d.toString());
        assertEquals(new KernelChoice.Debian(null, "6.1.0-56"), KernelChoice.parse("debian@6.1.0-56"), "the machine's suite");
        assertEquals("sid", ((KernelChoice.Debian) KernelChoice.parse("debian:unstable@7.2.13+deb14")).suite());
        assertEquals(new KernelChoice.Debian("sid", "7.2.13+deb14"), new KernelChoice.Debian("sid").at("7.2.13+deb14"));
        for (String bad : List.of("debian:trixie@", "debian:trixie@../x", "debian:trixie@6.12 x", "debian:jessie@6.1.0-56")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> KernelChoice.parse(bad), bad);
            assertEquals(1, e.getMessage().lines().count(), e.getMessage());
        }
        // the cache directory names the build without the architecture suffix: one name for both arches
        GuestImages g = new GuestImages(Path.of("/nonexistent-repo"), Path.of("/c"));
        assertEquals(Path.of("/c/guest/trixie@6.12.117+deb13/arm64"), g.kernelDirectory(Arch.ARM64, d));
        assertEquals(Path.of("/c/guest/trixie@6.12.117+deb13/x86_64"),
                g.kernelDirectory(Arch.X86_64, (KernelChoice.Debian) KernelChoice.parse("debian:trixie@6.12.117+deb13-amd64")));
    }

    @Test
    void filesAreEverythingElse() {
        assertEquals(new KernelChoice.File(Path.of("arch/x86/boot/bzImage")), KernelChoice.parse("arch/x86/boot/bzImage"));
        assertEquals(new KernelChoice.File(Path.of("debian.img")), KernelChoice.parse("debian.img"));
    }

    @Test
    void unknownSuitesAreOneLineErrors() {
        for (String bad : List.of("debian:jessie", "debian:", "debian:sid-backports", "debian:bullseye")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> KernelChoice.parse(bad), bad);
            assertTrue(e.getMessage().startsWith("unknown Debian suite '"), e.getMessage());
            assertEquals(1, e.getMessage().lines().count(), e.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> KernelChoice.parse(""));
    }

    /** Suites in guest/<suite>/<arch>; busybox and the initramfs in guest/<arch>, shared. */
    @Test
    void cacheLayoutAndListing(@TempDir Path cache) throws Exception {
        GuestImages g = new GuestImages(Path.of("/nonexistent-repo"), cache);
        KernelChoice.Debian trixie = new KernelChoice.Debian("trixie");
        Path dir = g.kernelDirectory(Arch.ARM64, trixie);
        assertEquals(cache.resolve("guest/trixie/arm64"), dir);
        assertEquals(cache.resolve("guest/arm64"), g.directory(Arch.ARM64));
        assertEquals(cache.resolve("guest/" + GuestImages.hostSuite() + "/x86_64"), g.kernelDirectory(Arch.X86_64, new KernelChoice.Debian(GuestImages.hostSuite())));
        Files.createDirectories(dir);
        Files.write(dir.resolve("vmlinuz"), new byte[64]);
        Files.writeString(dir.resolve("version"), "package=linux-image-6.12.117+deb13-arm64\nversion=6.12.117-1\nrelease=6.12.117+deb13-arm64\nsuite=trixie\n");
        Files.createFile(dir.resolve(".kernel-verified"));
        // a verified cache is used without running the fetch script (the repository does not exist)
        assertEquals(dir.resolve("vmlinuz"), g.kernel(Arch.ARM64, trixie));
        assertEquals("6.12.117+deb13-arm64", g.kernelVersion(Arch.ARM64, trixie).get("release"));
        List<GuestImages.Cached> c = g.cached();
        assertEquals(1, c.size(), c.toString());
        assertEquals("trixie", c.getFirst().suite());
        assertEquals(Arch.ARM64, c.getFirst().arch());
        assertEquals("6.12.117+deb13-arm64", c.getFirst().release());
        KernelImageException e = assertThrows(KernelImageException.class, () -> g.kernel(Arch.ARM64, new KernelChoice.File(cache.resolve("nope"))));
        assertTrue(e.getMessage().endsWith("no such kernel file"), e.getMessage());
    }
}
