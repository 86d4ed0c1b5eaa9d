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
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.natives.NativeLibraries;

/**
 * Issue 31's library without a checkout: a throwaway {@code git clone} of this checkout's commit
 * installs kpemu's artifacts into a private local Maven repository ({@code ./kpemu install}'s
 * build), the clone is deleted, and then a project outside any checkout, built from the
 * {@code pom.xml} docs/library.md shows (copied from the document as written), with only
 * {@code dev.kpemu:kpemu-junit}, runs a JUnit test that boots a kernel and probes it: the native
 * engines come from kpemu-base's jar, unpacked into an empty user cache ({@code XDG_CACHE_HOME}),
 * and the kernel and busybox are fetched into it on first use.
 *
 * <p>Tagged {@code install} ({@code ./kpemu test-install}): it builds kpemu once more and downloads
 * a kernel.
 */
@Tag("install")
class InstalledLibraryTest {
    /** A hang guard for each nested process, not an assertion. */
    static final long LIMIT_MINUTES = 20;

    @Test
    void aProjectWithTheDocumentedPomBootsAKernelAfterTheCheckoutItWasInstalledFromIsDeleted(@TempDir Path tmp) throws Exception {
        Path checkout = NativeLibraries.repositoryRoot();
        String pom = documentedPom(Files.readString(checkout.resolve("docs/library.md")));
        String commit = run(checkout, Map.of(), tmp.resolve("rev.log"), "git", "rev-parse", "HEAD").strip();

        Path clone = tmp.resolve("kpemu-clone");
        run(tmp, Map.of(), tmp.resolve("clone.log"), "git", "clone", "-q", checkout.toString(), clone.toString());
        run(clone, Map.of(), tmp.resolve("checkout.log"), "git", "checkout", "-q", commit);
        Path m2 = localRepository(tmp.resolve("m2"));
        run(clone, Map.of("JAVA_HOME", System.getProperty("java.home")), tmp.resolve("install.log"),
                "mvn", "-B", "-o", "-q", "install", "-DskipTests", "-Dmaven.repo.local=" + m2,
                "-Dkpemu.natives=" + NativeLibraries.directory(), "-Dkpemu.cache=" + tmp.resolve("build-cache"));
        deleteTree(clone);
        assertFalse(Files.exists(clone));

        Path project = tmp.resolve("probes-in-junit");
        Files.createDirectories(project.resolve("src/test/java/org/example"));
        Files.writeString(project.resolve("pom.xml"), pom);
        Files.writeString(project.resolve("src/test/java/org/example/OpenTest.java"), FreshProjectTest.TEST);
        Path userCache = tmp.resolve("xdg-cache");
        String out = run(project, Map.of("JAVA_HOME", System.getProperty("java.home"), "XDG_CACHE_HOME", userCache.toString()),
                tmp.resolve("project.log"), "mvn", "-B", "-o", "test", "-Dmaven.repo.local=" + m2);

        Matcher m = Pattern.compile("fresh-project: cat opened .*").matcher(out);
        assertTrue(m.find(), out);
        System.out.println("installed-library: " + m.group());
        assertTrue(out.contains("Tests run: 1, Failures: 0, Errors: 0, Skipped: 0"), out);
        assertFalse(out.contains(clone.toString()), "a path into the deleted clone: " + out);
        assertTrue(out.contains("kpemu: unpacking libunicorn.so.2"), out);
        try (Stream<Path> s = Files.list(userCache.resolve("kpemu/natives"))) {
            Path natives = s.filter(p -> p.getFileName().toString().startsWith("bundled-")).findFirst().orElseThrow();
            assertTrue(Files.isRegularFile(natives.resolve(NativeLibraries.UNICORN)));
            assertTrue(Files.isRegularFile(natives.resolve(NativeLibraries.CLOCK)));
        }
        assertTrue(Files.isDirectory(userCache.resolve("kpemu/guest")), "the guest images were fetched into the user cache");
    }

    /** The one complete pom.xml docs/library.md shows, as written. */
    static String documentedPom(String doc) {
        Matcher m = Pattern.compile("```xml\n(<\\?xml.*?</project>\n)```", Pattern.DOTALL).matcher(doc);
        assertTrue(m.find(), "docs/library.md shows no complete pom.xml");
        return m.group(1);
    }

    /** An empty local repository but for links to every entry of the user's, kpemu's own artifacts left out. */
    static Path localRepository(Path dir) throws IOException {
        Path user = Path.of(System.getProperty("user.home"), ".m2", "repository");
        Files.createDirectories(dir.resolve("dev/kpemu"));
        FreshProjectTest.link(user, dir, "dev");
        FreshProjectTest.link(user.resolve("dev"), dir.resolve("dev"), "kpemu");
        return dir;
    }

    /** Runs a command with kpemu's own variables removed (but KPEMU_KERNEL) plus {@code env}; its output, asserting exit 0. */
    static String run(Path dir, Map<String, String> env, Path log, String... command) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(List.of(command)).directory(dir.toFile()).redirectErrorStream(true);
        Map<String, String> e = pb.environment();
        e.keySet().removeIf(k -> (k.startsWith("KPEMU") && !k.equals(dev.kpemu.image.GuestImages.DEFAULT_KERNEL_VARIABLE))
                || k.equals("MAVEN_OPTS") || k.equals("JAVA_TOOL_OPTIONS") || k.equals("XDG_CACHE_HOME"));
        e.putAll(env);
        pb.redirectOutput(log.toFile());
        Process p = pb.start();
        if (!p.waitFor(LIMIT_MINUTES, TimeUnit.MINUTES)) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            throw new AssertionError(String.join(" ", command) + " hung; its log: " + log);
        }
        String out = Files.readString(log, StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), String.join(" ", command) + ":\n" + out);
        return out;
    }

    static void deleteTree(Path dir) throws IOException {
        List<Path> all = new ArrayList<>();
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(all::add);
        }
        for (Path p : all) {
            p.toFile().setWritable(true);
            Files.delete(p);
        }
    }
}
