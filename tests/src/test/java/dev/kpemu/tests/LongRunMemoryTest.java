package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.machine.Arch;

/**
 * Issue 12, memory flat over long runs: {@code kpemu boot} with a probe on a hot function
 * ({@code kmem_cache_alloc}, three fetchargs with a string) over a guest loop of 500 {@code cat}s
 * gives about 60,000 events, and every output that needs the whole trace — {@code --record},
 * {@code --perfetto}, {@code --expect} — runs in a JVM whose heap is bounded at {@value #HEAP}.
 * kpemu at c499d05, which kept every event in a list (and built the record, JSON and comparison
 * from it at the end), dies of {@code OutOfMemoryError} on the first run at that bound (measured
 * with the same command); a boot without probes needs more than 128m.
 *
 * <p>Second run against the first's file: the comparison, streamed against the golden read as it
 * goes, says the traces are equal (the runs are deterministic) — and the record written again is
 * the same file byte for byte.
 */
@Tag("kernel")
@Tag("scale")
class LongRunMemoryTest {
    static final String HEAP = "160m";
    static final String PROBE = "p:hot kmem_cache_alloc s=%di f=%si name=+0(+96(%di)):string";
    static final int LOOPS = 500;

    record Run(int code, String err) {}

    static Run kpemu(Path dir, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Xss4m", "-Xmx" + HEAP,
                "-Dkpemu.natives=" + System.getProperty("kpemu.natives"), "-Dkpemu.cache=" + System.getProperty("kpemu.cache"),
                "-cp", System.getProperty("java.class.path"), "dev.kpemu.cli.Main"));
        cmd.addAll(List.of(args));
        File err = dir.resolve("stderr-" + System.nanoTime() + ".txt").toFile();
        Process p = new ProcessBuilder(cmd).redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(err).start();
        int code = p.waitFor();
        return new Run(code, Files.readString(err.toPath(), StandardCharsets.UTF_8));
    }

    @Test
    void aLongProbedRunStreamsItsOutputsInABoundedHeap(@TempDir Path tmp) throws Exception {
        String init = """
                #!/bin/sh
                export PATH=/bin
                mount -t proc proc /proc
                i=0
                while [ $i -lt %d ]; do cat /proc/version > /dev/null; i=$((i+1)); done
                poweroff -f
                """.formatted(LOOPS);
        Path initrd = Initramfs.defaultGuest(Files.readAllBytes(GuestImages.forRepository().busybox(Arch.X86_64)))
                .file("init", 0755, init).write(tmp.resolve("loop.cpio"));
        Path golden = tmp.resolve("golden.trace"), again = tmp.resolve("again.trace"), json = tmp.resolve("run.json");
        String console = tmp.resolve("console.txt").toString();

        Run first = kpemu(tmp, "boot", "--arch", "x86_64", "--initrd", initrd.toString(), "--console", console,
                "-e", PROBE, "--record", golden.toString());
        assertEquals(0, first.code(), first.err());
        Matcher m = Pattern.compile("kpemu: recorded (\\d+) events").matcher(first.err());
        assertTrue(m.find(), first.err());
        int events = Integer.parseInt(m.group(1));
        assertTrue(events > 50_000, "a long run: " + events + " events");

        Run second = kpemu(tmp, "boot", "--arch", "x86_64", "--initrd", initrd.toString(), "--console", console,
                "-e", PROBE, "--expect", golden.toString(), "--perfetto", json.toString(), "--record", again.toString());
        assertEquals(0, second.code(), second.err());
        assertTrue(second.err().contains("traces equal (EXACT, tasks, timestamps): " + events + " events"), second.err());
        assertTrue(second.err().contains("perfetto JSON " + json + ": "), second.err());
        assertTrue(second.err().contains(", " + events + " instants, 0 slices, 2 phases"), second.err());
        assertEquals(Files.readString(golden), Files.readString(again), "the record, written again");
        try (var lines = Files.lines(golden)) {
            assertEquals(events, lines.filter(l -> l.contains(": hot: (kmem_cache_alloc+0x0/")).count());
        }
    }
}
