package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

/**
 * A benchmark's kpemu children run with the options the launcher exports for {@code kpemu boot}
 * ({@link LauncherBootOptions}), not with the benchmark's own JVM options.
 */
class LauncherBootOptionsTest {
    private static final List<String> BENCH_OWN = List.of("-XX:+UseSerialGC", "-Dkpemu.root=/repo");

    @Test
    void theLaunchersBootOptionsPassThroughOnePerLine() {
        // as ./kpemu exports them: printf '%s\n' "${boot_java_opts[@]}" (a trailing newline, a path with a space)
        String exported = "-XX:TieredStopAtLevel=1\n-XX:AOTCache=/home/a user/.cache/kpemu/cds/kpemu-25.aot\n-Xlog:aot=off\n"
                + "-XX:+UseSerialGC\n-Dkpemu.root=/repo\n";
        assertEquals(List.of("-XX:TieredStopAtLevel=1", "-XX:AOTCache=/home/a user/.cache/kpemu/cds/kpemu-25.aot", "-Xlog:aot=off",
                "-XX:+UseSerialGC", "-Dkpemu.root=/repo"),
                LauncherBootOptions.forChildren(Map.of(LauncherBootOptions.VARIABLE, exported), BENCH_OWN));
    }

    @Test
    void withoutTheLauncherTheChildrenTakeThisJvmsOptions() {
        assertEquals(BENCH_OWN, LauncherBootOptions.forChildren(Map.of(), BENCH_OWN));
        assertEquals(BENCH_OWN, LauncherBootOptions.forChildren(Map.of(LauncherBootOptions.VARIABLE, "\n"), BENCH_OWN));
    }

    @Test
    void theChildsCommandPutsTheOptionsBeforeTheClassPath() {
        List<String> c = GuestBench.java(List.of("-XX:TieredStopAtLevel=1", "-Da=b c"));
        assertEquals(Path.of(System.getProperty("java.home"), "bin", "java").toString(), c.get(0));
        assertEquals(List.of("-XX:TieredStopAtLevel=1", "-Da=b c", "-cp", System.getProperty("java.class.path"), Main.class.getName()),
                c.subList(1, c.size()));
    }

    @Test
    void thePrintedCommandQuotesWordsAShellWouldSplit() {
        assertEquals("-Xss4m", JobBench.shellWord("-Xss4m"));
        assertEquals("'console=ttyS0 nokaslr'", JobBench.shellWord("console=ttyS0 nokaslr"));
        assertEquals("'/a/lib/*'", JobBench.shellWord("/a/lib/*"));
        assertEquals("'it'\\''s'", JobBench.shellWord("it's"));
    }
}
