package dev.kpemu.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.natives.NativeLibraries;

/**
 * Issue 31's Debian package ({@code ./kpemu deb}, which {@code ./kpemu test-install} runs first),
 * installed with apt into a clean Debian 12 root (debootstrap minbase by scripts/debian-root.sh:
 * no JDK, Maven or gcc), used there through chroot as a new user would: {@code kpemu --version},
 * {@code kpemu boot --arch x86_64 -- uname -r} (exit 0, the kernel's release), and
 * {@code kpemu demo}, which prints traces on both arches (downloads included on this first run).
 * Needs root (chroot, mounting /proc) and the Debian mirror.
 */
@Tag("install")
class DebianPackageTest {
    @Test
    void thePackageInstallsWithAptIntoACleanDebian12AndRunsTheDemo(@TempDir Path tmp) throws Exception {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root: chroot and mount");
        Path repo = NativeLibraries.repositoryRoot();
        Path deb = newest(repo.resolve("dist"), "_" + debArch() + ".deb");
        Map<String, String> env = Map.of("PATH", "/usr/sbin:/usr/bin:/sbin:/bin",
                "KPEMU_CACHE", NativeLibraries.cacheDirectory().toString());
        ReleaseArchiveTest.Run made = ReleaseArchiveTest.run(tmp, env, "bash", repo.resolve("scripts/debian-root.sh").toString(), "bookworm");
        assertEquals(0, made.code(), made.out());
        Path base = Path.of(made.out().strip().lines().reduce((a, b) -> b).orElseThrow());

        Path root = tmp.resolve("root");
        assertEquals(0, ReleaseArchiveTest.run(tmp, env, "cp", "-a", base.toString(), root.toString()).code());
        Files.copy(deb, root.resolve("tmp").resolve(deb.getFileName()));
        Files.copy(Path.of("/etc/resolv.conf"), root.resolve("etc/resolv.conf"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        assertEquals(0, ReleaseArchiveTest.run(tmp, env, "mount", "-t", "proc", "proc", root.resolve("proc").toString()).code());
        try {
            ReleaseArchiveTest.Run none = chroot(tmp, root, "command -v java javac mvn gcc cc");
            assertEquals("", none.out().strip(), "the clean root has no JDK, Maven or compiler");
            ReleaseArchiveTest.Run install = chroot(tmp, root, "apt-get update -q && apt-get install -y -q /tmp/" + deb.getFileName());
            assertEquals(0, install.code(), install.out());
            assertTrue(install.out().contains("Setting up kpemu"), install.out());

            ReleaseArchiveTest.Run version = chroot(tmp, root, "kpemu --version");
            assertEquals(0, version.code(), version.out());
            assertTrue(version.out().startsWith("kpemu ") && version.out().contains("\nUnicorn 2.1.")
                    && version.out().contains("\nCapstone 5.") && version.out().contains("\nJava 25"), version.out());
            ReleaseArchiveTest.Run man = chroot(tmp, root, "test -s /usr/share/man/man1/kpemu-boot.1.gz && test -s /usr/share/bash-completion/completions/kpemu && echo present");
            assertEquals("present", man.out().strip(), man.out());

            long start = System.nanoTime();
            ReleaseArchiveTest.Run demo = chroot(tmp, root, "cd /tmp && kpemu demo");
            double demoSeconds = (System.nanoTime() - start) / 1e9;
            assertEquals(0, demo.code(), demo.out());
            assertTrue(demo.out().contains("-- x86_64: guest powered off (exit 0)") && demo.out().contains("-- arm64: guest powered off (exit 0)"), demo.out());
            assertTrue(demo.out().lines().anyMatch(l -> l.contains("(__x64_sys_openat+") && l.contains("<- do_sys_openat2)")), demo.out());
            assertTrue(demo.out().lines().anyMatch(l -> l.contains("(__arm64_sys_openat+") && l.contains("<- do_sys_openat2)")), demo.out());

            String pinned = System.getenv(dev.kpemu.image.GuestImages.DEFAULT_KERNEL_VARIABLE);
            String kernelEnv = pinned != null ? "KPEMU_KERNEL=" + pinned + " " : "";
            ReleaseArchiveTest.Run boot = chroot(tmp, root, "cd / && " + kernelEnv + "kpemu boot --arch x86_64 -- uname -r");
            assertEquals(0, boot.code(), boot.out());
            if (pinned != null && pinned.contains("@")) {
                assertTrue(boot.out().lines().anyMatch(l -> l.equals(pinned.substring(pinned.indexOf('@') + 1) + "-amd64")), boot.out());
            }
            System.out.printf("debian-package: %s (%d MiB); first kpemu demo after install, downloads included: %.1f s; user cache after it and the boot: %d MiB%n",
                    deb.getFileName(), Files.size(deb) >> 20, demoSeconds, ReleaseArchiveTest.size(root.resolve("root/.cache/kpemu")) >> 20);
        } finally {
            ReleaseArchiveTest.run(tmp, env, "umount", root.resolve("proc").toString());
        }
    }

    private static ReleaseArchiveTest.Run chroot(Path tmp, Path root, String script) throws Exception {
        return ReleaseArchiveTest.run(tmp, Map.of("PATH", "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND", "noninteractive"),
                "chroot", root.toString(), "/bin/sh", "-c", script);
    }

    static String debArch() {
        return switch (NativeLibraries.hostArch()) {
            case "x86_64" -> "amd64";
            case "aarch64" -> "arm64";
            default -> NativeLibraries.hostArch();
        };
    }

    static Path newest(Path dir, String suffix) throws IOException {
        try (Stream<Path> s = Files.exists(dir) ? Files.list(dir) : Stream.empty()) {
            return s.filter(p -> p.getFileName().toString().endsWith(suffix))
                    .max(Comparator.comparing(p -> p.toFile().lastModified()))
                    .orElseThrow(() -> new AssertionError("no dist/kpemu_*" + suffix + ": run ./kpemu deb (./kpemu test-install does)"));
        }
    }
}
