package dev.kpemu.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 16's acceptance: a Maven project outside the repository, whose only dependency is
 * {@code dev.kpemu:kpemu-junit} as docs/library.md says, boots a kernel and registers a Java
 * kprobe in a JUnit test — with no system property, no JVM flag and no {@code KPEMU_*} variable
 * but {@code KPEMU_KERNEL} ({@code ./kpemu test} pins the default kernel to the recorded build).
 *
 * <p>{@code ./kpemu install} puts kpemu's artifacts in the local Maven repository; here the jars
 * and POMs this build just packaged are laid out the same way in a temporary local repository
 * (so the test neither rebuilds kpemu nor writes to the user's repository), whose other content
 * is the user's repository, linked entry by entry. The project is then built offline.
 */
@Tag("kernel")
class FreshProjectTest {
    static final String VERSION = "0.1.0-SNAPSHOT";
    /** A hang guard for the nested Maven build, not an assertion. */
    static final long LIMIT_MINUTES = 15;

    static final String POM = """
            <?xml version="1.0" encoding="UTF-8"?>
            <project xmlns="http://maven.apache.org/POM/4.0.0">
              <modelVersion>4.0.0</modelVersion>
              <groupId>org.example</groupId>
              <artifactId>probes-in-junit</artifactId>
              <version>1</version>
              <properties>
                <maven.compiler.release>25</maven.compiler.release>
                <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
              </properties>
              <dependencies>
                <dependency>
                  <groupId>dev.kpemu</groupId>
                  <artifactId>kpemu-junit</artifactId>
                  <version>%s</version>
                  <scope>test</scope>
                </dependency>
              </dependencies>
              <build>
                <plugins>
                  <plugin><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
                  <plugin><artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version></plugin>
                  <plugin><artifactId>maven-surefire-plugin</artifactId><version>3.5.2</version></plugin>
                </plugins>
              </build>
            </project>
            """.formatted(VERSION);

    static final String TEST = """
            package org.example;

            import static org.junit.jupiter.api.Assertions.assertEquals;
            import static org.junit.jupiter.api.Assertions.assertTrue;

            import dev.kpemu.api.KpemuSession;
            import dev.kpemu.api.Kprobe;
            import dev.kpemu.api.Outcome;
            import dev.kpemu.api.SessionResult;
            import dev.kpemu.junit.KpemuTest;

            class OpenTest {
                @KpemuTest(command = {"cat", "/proc/version"}, timeoutSeconds = 30)
                void catOpensItsArgument(KpemuSession session) {
                    StringBuilder seen = new StringBuilder();
                    Kprobe open = session.register(Kprobe.on("do_sys_openat2").pre(ctx -> {
                        if (ctx.comm().equals("cat")) seen.append(ctx.string(ctx.arg("filename")).orElse("(fault)")).append('\\n');
                    }));
                    SessionResult r = session.run();
                    assertEquals(Outcome.POWERED_OFF, r.outcome(), r.status());
                    assertEquals(0, r.commandExit());
                    assertTrue(open.hits() > 0);
                    assertTrue(seen.toString().contains("/proc/version\\n"), seen.toString());
                    System.out.println("fresh-project: cat opened " + seen.toString().strip().replace('\\n', ' ') + "; " + open.hits() + " hits");
                }
            }
            """;

    @Test
    void aProjectWithOnlyTheDocumentedDependencyBootsAKernelAndProbesIt(@TempDir Path tmp) throws Exception {
        Path repo = localRepository(tmp.resolve("m2"));
        Path project = tmp.resolve("probes-in-junit");
        Files.createDirectories(project.resolve("src/test/java/org/example"));
        Files.writeString(project.resolve("pom.xml"), POM);
        Files.writeString(project.resolve("src/test/java/org/example/OpenTest.java"), TEST);

        ProcessBuilder pb = new ProcessBuilder("mvn", "-B", "-o", "test", "-Dmaven.repo.local=" + repo)
                .directory(project.toFile()).redirectErrorStream(true);
        Map<String, String> env = pb.environment();
        // nothing that tells kpemu where things are; KPEMU_KERNEL (which build "debian" means) stays
        env.keySet().removeIf(k -> (k.startsWith("KPEMU") && !k.equals(dev.kpemu.image.GuestImages.DEFAULT_KERNEL_VARIABLE))
                || k.equals("MAVEN_OPTS") || k.equals("JAVA_TOOL_OPTIONS"));
        env.put("JAVA_HOME", System.getProperty("java.home"));
        Path log = tmp.resolve("build.log");
        pb.redirectOutput(log.toFile());
        Process p = pb.start();
        if (!p.waitFor(LIMIT_MINUTES, TimeUnit.MINUTES)) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            throw new AssertionError("the nested build hung; its log: " + log);
        }
        String out = Files.readString(log, StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), out);
        Matcher m = Pattern.compile("fresh-project: cat opened .*").matcher(out);
        assertTrue(m.find(), out);
        System.out.println(m.group());
        assertTrue(out.contains("Tests run: 1, Failures: 0, Errors: 0, Skipped: 0"), out);
        assertFalse(out.contains("kpemu.root"), out);
    }

    /**
     * A local repository holding this build's kpemu artifacts where {@code mvn install} puts them,
     * and every other entry of the user's local repository as a link.
     */
    static Path localRepository(Path dir) throws IOException {
        Path user = Path.of(System.getProperty("user.home"), ".m2", "repository");
        Path kpemu = dir.resolve("dev/kpemu");
        Files.createDirectories(kpemu);
        link(user, dir, "dev");
        link(user.resolve("dev"), dir.resolve("dev"), "kpemu");
        Path root = dev.kpemu.natives.NativeLibraries.repositoryRoot();
        install(kpemu, "kpemu-parent", root.resolve("pom.xml"), null);
        List<Path> jars = builtJars();
        assertTrue(jars.stream().anyMatch(j -> j.getFileName().toString().startsWith("kpemu-junit-")),
                "kpemu-junit's jar is not on the test class path (run through ./kpemu test, which packages it): " + jars);
        // the module each jar was built in (MODULE/target/kpemu-ARTIFACT-VERSION.jar) gives its POM
        for (Path jar : jars) {
            String name = jar.getFileName().toString();
            install(kpemu, name.substring(0, name.length() - ("-" + VERSION + ".jar").length()), jar.getParent().getParent().resolve("pom.xml"), jar);
        }
        return dir;
    }

    /** Links every entry of {@code from} but {@code except} into {@code to} (a local repository that shares the user's). */
    static void link(Path from, Path to, String except) throws IOException {
        if (!Files.isDirectory(from)) return;
        try (var entries = Files.list(from)) {
            for (Path e : entries.toList()) {
                if (!e.getFileName().toString().equals(except)) Files.createSymbolicLink(to.resolve(e.getFileName().toString()), e);
            }
        }
    }

    private static void install(Path kpemu, String artifact, Path pom, Path jar) throws IOException {
        Path d = Files.createDirectories(kpemu.resolve(artifact).resolve(VERSION));
        Files.copy(pom, d.resolve(artifact + "-" + VERSION + ".pom"));
        if (jar != null) Files.copy(jar, d.resolve(artifact + "-" + VERSION + ".jar"));
    }

    /**
     * The kpemu jars this build packaged that the extension needs: kpemu-junit and everything it
     * depends on, as Maven put them on the test's class path (the reactor's jars under
     * {@code ./kpemu test}); test jars and the examples' own classes are not among them.
     */
    private static List<Path> builtJars() {
        List<Path> jars = new ArrayList<>();
        for (String e : System.getProperty("java.class.path").split(java.io.File.pathSeparator)) {
            Path p = Path.of(e);
            String name = p.getFileName() == null ? "" : p.getFileName().toString();
            if (name.startsWith("kpemu-") && name.endsWith("-" + VERSION + ".jar") && Files.isRegularFile(p.getParent().getParent().resolve("pom.xml"))) jars.add(p);
        }
        return jars;
    }
}
