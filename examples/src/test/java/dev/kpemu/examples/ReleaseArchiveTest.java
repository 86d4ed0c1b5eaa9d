package dev.kpemu.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.natives.NativeLibraries;

/**
 * Issue 31's release archive ({@code ./kpemu dist}, which {@code ./kpemu test-install} runs
 * first): unpacked into a directory outside the repository and run through a symlink from
 * another directory, with a PATH that holds no {@code java} and no JAVA_HOME, and an empty user
 * cache: {@code kpemu --version} names kpemu, Unicorn, Capstone and the Java runtime, and
 * {@code kpemu boot --arch x86_64 -- uname -r} fetches the kernel and busybox on first use and
 * exits 0 with the kernel's release.
 */
@Tag("install")
class ReleaseArchiveTest {
    static final long LIMIT_MINUTES = 20;

    @Test
    void theUnpackedArchiveRunsWithoutAJdkFromAnyDirectory(@TempDir Path tmp) throws Exception {
        Path archive = archive(NativeLibraries.repositoryRoot().resolve("dist"));
        Path unpacked = Files.createDirectories(tmp.resolve("opt"));
        run(tmp, Map.of("PATH", "/usr/bin:/bin"), "tar", "-xzf", archive.toString(), "-C", unpacked.toString());
        Path home;
        try (Stream<Path> s = Files.list(unpacked)) {
            home = s.findFirst().orElseThrow();
        }
        Path links = Files.createDirectories(tmp.resolve("links"));
        Files.createSymbolicLink(links.resolve("kpemu"), home.resolve("bin/kpemu"));
        Path path = pathWithoutJava(Files.createDirectories(tmp.resolve("path")));
        Path work = Files.createDirectories(tmp.resolve("elsewhere"));
        Path cache = tmp.resolve("xdg-cache");
        Map<String, String> env = Map.of("PATH", path.toString(), "XDG_CACHE_HOME", cache.toString());

        Run version = run(work, env, links.resolve("kpemu").toString(), "--version");
        assertEquals(0, version.code, version.out);
        List<String> lines = version.out.lines().toList();
        assertTrue(lines.get(0).startsWith("kpemu "), version.out);
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("Unicorn 2.1.")), version.out);
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("Capstone 5.")), version.out);
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("Java 25")), version.out);

        long start = System.nanoTime();
        Run boot = run(work, env, links.resolve("kpemu").toString(), "boot", "--arch", "x86_64", "--", "uname", "-r");
        double seconds = (System.nanoTime() - start) / 1e9;
        assertEquals(0, boot.code, boot.out);
        String pinned = System.getenv(dev.kpemu.image.GuestImages.DEFAULT_KERNEL_VARIABLE);
        if (pinned != null && pinned.contains("@")) {
            assertTrue(boot.out.lines().anyMatch(l -> l.equals(pinned.substring(pinned.indexOf('@') + 1) + "-amd64")), boot.out);
        }
        assertTrue(Files.isDirectory(cache.resolve("kpemu/guest")), "kernels fetched into the user cache");
        assertFalse(Files.exists(work.resolve(".cache")));
        System.out.printf("release-archive: %s (%d MiB); first boot with downloads %.1f s; user cache %d MiB%n",
                archive.getFileName(), Files.size(archive) >> 20, seconds, size(cache) >> 20);
    }

    /** The newest release archive for this host in {@code dist}. */
    static Path archive(Path dist) throws IOException {
        String suffix = "-linux-" + NativeLibraries.hostArch() + ".tar.gz";
        try (Stream<Path> s = Files.exists(dist) ? Files.list(dist) : Stream.empty()) {
            return s.filter(p -> p.getFileName().toString().endsWith(suffix))
                    .max(Comparator.comparing(p -> p.toFile().lastModified()))
                    .orElseThrow(() -> new AssertionError("no dist/kpemu-*" + suffix + ": run ./kpemu dist (./kpemu test-install does)"));
        }
    }

    /** A directory of links to every command of /usr/bin and /bin except Java's. */
    static Path pathWithoutJava(Path dir) throws IOException {
        for (String d : List.of("/usr/bin", "/bin", "/usr/sbin", "/sbin")) {
            try (Stream<Path> s = Files.list(Path.of(d))) {
                for (Path p : s.toList()) {
                    String n = p.getFileName().toString();
                    if (n.startsWith("java") || n.equals("jshell") || n.equals("jlink") || Files.exists(dir.resolve(n), java.nio.file.LinkOption.NOFOLLOW_LINKS)) continue;
                    Files.createSymbolicLink(dir.resolve(n), p);
                }
            }
        }
        return dir;
    }

    record Run(int code, String out) {}

    /** Runs a command with only PATH, HOME, KPEMU_KERNEL and {@code env} in its environment. */
    static Run run(Path dir, Map<String, String> env, String... command) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(List.of(command)).directory(dir.toFile()).redirectErrorStream(true);
        Map<String, String> e = pb.environment();
        String kernel = e.get(dev.kpemu.image.GuestImages.DEFAULT_KERNEL_VARIABLE);
        e.clear();
        e.put("HOME", System.getProperty("user.home"));
        if (kernel != null) e.put(dev.kpemu.image.GuestImages.DEFAULT_KERNEL_VARIABLE, kernel);
        e.putAll(env);
        Path log = Files.createTempFile(dir.getParent(), "run", ".log");
        pb.redirectOutput(log.toFile());
        Process p = pb.start();
        if (!p.waitFor(LIMIT_MINUTES, TimeUnit.MINUTES)) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            throw new AssertionError(String.join(" ", command) + " hung; its log: " + log);
        }
        return new Run(p.exitValue(), Files.readString(log, StandardCharsets.UTF_8));
    }

    static long size(Path dir) throws IOException {
        List<Long> sizes = new ArrayList<>();
        try (Stream<Path> s = Files.walk(dir)) {
            s.filter(Files::isRegularFile).forEach(p -> sizes.add(p.toFile().length()));
        }
        return sizes.stream().mapToLong(Long::longValue).sum();
    }
}
