package dev.kpemu.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.InputStream;
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
 * Issue 31's host arm64, as far as an x86-64 machine allows: the aarch64 release archive that
 * {@code ./kpemu dist --host-arch arm64} cross-builds ({@code ./kpemu test-install} runs it first)
 * holds arm64 code only — the runtime's {@code java} and {@code libjvm.so}, Unicorn, Capstone and
 * kpemu's C hooks — and its {@code bin/kpemu --version}, run through a symlink from another
 * directory with QEMU's user-mode emulator ({@code KPEMU_RUNTIME_WRAPPER}, the emulator and the
 * arm64 libraries from {@code scripts/fetch-cross-host.sh}), loads the arm64 Unicorn and Capstone
 * and names them and the Java runtime. A boot under the emulator is not run here (too slow for a
 * test; docs/guide.md has the measurement).
 */
@Tag("install")
class CrossBuiltArchiveTest {
    /** ELF's e_machine of AArch64 (EM_AARCH64). */
    static final int EM_AARCH64 = 183;

    @Test
    void theAarch64ArchiveHoldsArm64CodeAndRunsUnderQemuUser(@TempDir Path tmp) throws Exception {
        assumeTrue(NativeLibraries.hostArch().equals("x86_64"), "the aarch64 archive is cross-built on x86-64 machines only");
        Path archive = archive(NativeLibraries.repositoryRoot().resolve("dist"));
        Path unpacked = Files.createDirectories(tmp.resolve("opt"));
        ReleaseArchiveTest.run(tmp, Map.of("PATH", "/usr/bin:/bin"), "tar", "-xzf", archive.toString(), "-C", unpacked.toString());
        Path home;
        try (Stream<Path> s = Files.list(unpacked)) {
            home = s.findFirst().orElseThrow();
        }
        for (String f : List.of("runtime/bin/java", "runtime/lib/server/libjvm.so", "lib/native/libunicorn.so.2",
                "lib/native/libcapstone.so", "lib/native/libkpemu_clock.so")) {
            assertEquals(EM_AARCH64, elfMachine(home.resolve(f)), f + " is not AArch64 code");
        }

        Path cross = NativeLibraries.cacheDirectory().resolve("cross-arm64");
        Path qemu = cross.resolve("qemu-aarch64");
        assertTrue(Files.isExecutable(qemu), qemu + " missing: scripts/fetch-cross-host.sh arm64 (./kpemu dist --host-arch arm64) fetches it");
        Path links = Files.createDirectories(tmp.resolve("links"));
        Files.createSymbolicLink(links.resolve("kpemu"), home.resolve("bin/kpemu"));
        Path work = Files.createDirectories(tmp.resolve("elsewhere"));
        Map<String, String> env = Map.of("PATH", ReleaseArchiveTest.pathWithoutJava(Files.createDirectories(tmp.resolve("path"))).toString(),
                "XDG_CACHE_HOME", tmp.resolve("xdg-cache").toString(),
                "KPEMU_RUNTIME_WRAPPER", qemu + " -L " + cross.resolve("sysroot"));

        long start = System.nanoTime();
        ReleaseArchiveTest.Run version = ReleaseArchiveTest.run(work, env, links.resolve("kpemu").toString(), "--version");
        double seconds = (System.nanoTime() - start) / 1e9;
        assertEquals(0, version.code(), version.out());
        List<String> lines = version.out().lines().toList();
        assertTrue(lines.get(0).startsWith("kpemu "), version.out());
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("Unicorn 2.1.")), version.out());
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("Capstone 5.")), version.out());
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("Java 25")), version.out());
        System.out.printf("cross-built archive: %s (%d MiB); --version under qemu-aarch64 %.1f s%n",
                archive.getFileName(), Files.size(archive) >> 20, seconds);
    }

    /** The newest aarch64 release archive in {@code dist}. */
    static Path archive(Path dist) throws IOException {
        String suffix = "-linux-aarch64.tar.gz";
        try (Stream<Path> s = Files.exists(dist) ? Files.list(dist) : Stream.empty()) {
            return s.filter(p -> p.getFileName().toString().endsWith(suffix))
                    .max(Comparator.comparing(p -> p.toFile().lastModified()))
                    .orElseThrow(() -> new AssertionError("no dist/kpemu-*" + suffix + ": run ./kpemu dist --host-arch arm64 (./kpemu test-install does)"));
        }
    }

    /** An ELF file's e_machine (the little-endian half-word at offset 18); -1 if it is no ELF file. */
    static int elfMachine(Path file) throws IOException {
        byte[] h = new byte[20];
        try (InputStream in = Files.newInputStream(file)) {
            if (in.readNBytes(h, 0, h.length) < h.length) return -1;
        }
        if (h[0] != 0x7f || h[1] != 'E' || h[2] != 'L' || h[3] != 'F') return -1;
        return (h[18] & 0xff) | (h[19] & 0xff) << 8;
    }
}
