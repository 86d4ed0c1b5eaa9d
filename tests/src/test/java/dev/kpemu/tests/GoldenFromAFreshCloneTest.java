package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.cli.ExitCodes;
import dev.kpemu.kprobes.events.RecordedTrace;
import dev.kpemu.natives.NativeLibraries;

/**
 * A golden recorded by one build compares equal, timestamps included, when a fresh clone of the
 * repository — its own build directory, built by its own launcher — boots the same kernel with
 * the same definitions: nothing of the host or the build directory reaches the trace (guest
 * time is virtual on both arches; x86 here, whose rdtsc reads the virtual clock). Kernel images
 * and native libraries come from the same cache, as they would on a CI runner with a warm cache.
 */
@Tag("kernel")
class GoldenFromAFreshCloneTest {
    static final List<String> DEFS = List.of("p:myopen do_sys_openat2 dfd=%di fn=+0(%si):ustring", "r:myret do_sys_openat2 ret=$retval");

    @Test
    void aGoldenRecordedHereComparesEqualFromAFreshClone(@TempDir Path tmp) throws Exception {
        Path root = NativeLibraries.repositoryRoot();
        Assumptions.assumeTrue(Files.isDirectory(root.resolve(".git")) || Files.isRegularFile(root.resolve(".git")),
                "not a git checkout: " + root);
        Path golden = tmp.resolve("golden.trace");
        List<String> args = new ArrayList<>(List.of("boot", "--arch", "x86_64", "--console", tmp.resolve("console-1.txt").toString()));
        for (String d : DEFS) args.addAll(List.of("-e", d));
        KpemuInProcess.Run here = KpemuInProcess.kpemu(concat(args, "--record", golden.toString()));
        assertEquals(ExitCodes.OK, here.code(), here.err());
        int events = RecordedTrace.read(golden).events().size();
        assertTrue(events > 20, "the workload hits the probes: " + events);

        Path clone = tmp.resolve("clone");
        run(List.of("git", "clone", "--quiet", "--no-hardlinks", root.toString(), clone.toString()), root, tmp.resolve("git.log"));
        List<String> cmd = new ArrayList<>(List.of(clone.resolve("kpemu").toString(), "boot", "--arch", "x86_64",
                "--console", tmp.resolve("console-2.txt").toString()));
        for (String d : DEFS) cmd.addAll(List.of("-e", d));
        cmd.addAll(List.of("--expect", golden.toString()));
        Path log = tmp.resolve("clone.log");
        int code = run(cmd, clone, log);
        String out = Files.readString(log, StandardCharsets.UTF_8);
        assertEquals(ExitCodes.OK, code, out);
        assertTrue(out.contains("traces equal (EXACT, tasks, timestamps): " + events + " events"), out);
    }

    static String[] concat(List<String> a, String... more) {
        List<String> all = new ArrayList<>(a);
        all.addAll(List.of(more));
        return all.toArray(String[]::new);
    }

    /** Runs {@code cmd} in {@code dir} with stdout and stderr to {@code log}; the project cache is shared. */
    static int run(List<String> cmd, Path dir, Path log) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).redirectOutput(log.toFile());
        String cache = System.getProperty("kpemu.cache");
        if (cache != null) pb.environment().put("KPEMU_CACHE", new File(cache).getAbsolutePath());
        pb.environment().put("CI", "true");
        Process p = pb.start();
        if (!p.waitFor(15, TimeUnit.MINUTES)) {
            p.destroyForcibly();
            throw new AssertionError("timed out: " + cmd);
        }
        return p.exitValue();
    }
}
