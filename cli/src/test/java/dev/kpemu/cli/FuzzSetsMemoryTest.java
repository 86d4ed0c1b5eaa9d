package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.image.RecordedKernels;

/**
 * {@code kpemu fuzz} boots one kpemu machine a set in one JVM: the closed machines must not stay
 * on the heap. On arm64 the system-register filter's upcall stub (bound to the engine and its
 * machine) lived in an arena nothing closed, so every set's machine stayed reachable: measured on
 * Debian 13's kernel, the heap live after a full GC grew by 13 MiB a set (141 MiB after the first,
 * 311 after the 13th) and a 20-minute run died of "Java heap space" after 129 sets; with the arena
 * closed with its hook, 106 MiB after each. Here {@value #SETS} sets run in a child JVM bounded at
 * {@value #HEAP}: with the leak the second set died of OutOfMemoryError there (measured).
 */
@Tag("kernel")
@Tag("scale")
class FuzzSetsMemoryTest {
    static final String HEAP = "192m";
    static final int SETS = 10;

    @Test
    void arm64SetsRunInABoundedHeap(@TempDir Path dir) throws Exception {
        String kernel = RecordedKernels.choice("trixie").toString();
        List<String> cmd = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Xss4m", "-XX:+UseSerialGC", "-Xmx" + HEAP,
                "-Dkpemu.natives=" + System.getProperty("kpemu.natives"), "-Dkpemu.cache=" + System.getProperty("kpemu.cache"),
                "-cp", System.getProperty("java.class.path"), FuzzSetsInOneJvm.class.getName(), "arm64", kernel, SETS + "", dir.toString());
        File out = dir.resolve("child.txt").toFile();
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(out).start();
        int code = p.waitFor();
        String log = Files.readString(out.toPath(), StandardCharsets.UTF_8);
        assertEquals(0, code, log);
        assertEquals(SETS, log.lines().filter(l -> l.matches("set \\d+: \\d+ events")).count(), log);
    }
}
