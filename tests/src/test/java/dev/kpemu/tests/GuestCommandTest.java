package dev.kpemu.tests;

import static dev.kpemu.tests.KpemuInProcess.kpemu;

import dev.kpemu.tests.KpemuInProcess.Run;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;


import dev.kpemu.cli.Main;
import dev.kpemu.machine.Arch;

/**
 * Issue 14: {@code kpemu boot -- CMD}, the virtme-ng workflow, on Debian's kernels of both arches:
 * the command's output and exit status, a static program of the test's own added with
 * {@code --add} and probed, timeouts that hold on an idle guest, SIGINT, an interactive session
 * through a pty, and recorded input replayed twice. Expected values are written by hand from the
 * commands and the C source below.
 */
@Tag("kernel")
class GuestCommandTest {
    /** How long a kpemu process may take before the test gives up on it (a hang guard, not an assertion). */
    static final long PROCESS_LIMIT_SECONDS = 600;


    /** The command line of kpemu in a JVM of its own (for signals and terminals). */
    static List<String> kpemuProcess(String... args) {
        List<String> c = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Xss4m", "-cp", System.getProperty("java.class.path")));
        for (String p : List.of("kpemu.natives", "kpemu.cache", "kpemu.root")) {
            if (System.getProperty(p) != null) c.add("-D" + p + "=" + System.getProperty(p));
        }
        c.add(Main.class.getName());
        c.addAll(List.of(args));
        return c;
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void commandOutputReachesStderrAndKpemuExitsWithItsStatus(Arch arch) {
        Run r = kpemu("boot", "--arch", arch.linuxName(), "--", "sh", "-c", "echo out; echo err >&2; exit 7");
        assertEquals(7, r.code(), r.err());
        assertEquals("out\nerr\n", r.err(), "the command's two lines and nothing else: boot messages are hidden");
        assertEquals("", r.out(), "no probes, no trace");
    }

    @org.junit.jupiter.api.Test
    void aKernelWithoutTheTerminalPortSaysSoInOneLine() {
        // 8250.nr_uarts=1: Linux registers ttyS0 only, so /init finds no /dev/ttyS1
        Run r = kpemu("boot", "--arch", "x86_64", "--append", "console=ttyS0 nokaslr 8250.nr_uarts=1", "--", "true");
        assertEquals(1, r.code(), r.err());
        assertEquals("kpemu: the command could not run: /dev/ttyS1: the kernel found no second serial port (or no devtmpfs)\n", r.err());
    }

    static final String PROGRAM = """
            #include <fcntl.h>
            #include <stdio.h>
            int main(void) {
                int fd = open("/etc/kpemu-probe-me", O_RDONLY);
                printf("kpemu-hello: open gave %d\\n", fd);
                return 3;
            }
            """;

    @ParameterizedTest
    @EnumSource(Arch.class)
    void staticProgramAddedWithAddRunsAndItsProbeEventsCarryItsComm(Arch arch, @TempDir Path tmp) throws Exception {
        Path src = Files.writeString(tmp.resolve("hello.c"), PROGRAM);
        Path prog = tmp.resolve("kpemu-hello");
        String cc = staticCompiler(arch);
        Process p = new ProcessBuilder(cc, "-static", "-O2", "-o", prog.toString(), src.toString()).redirectErrorStream(true).start();
        String ccOut = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), cc + ": " + ccOut);

        String arg = arch == Arch.X86_64 ? "%si" : "%x1";
        Run r = kpemu("boot", "--arch", arch.linuxName(), "--add", prog + ":/usr/bin/kpemu-hello",
                "-e", "p:myopen do_sys_openat2 fn=+0(" + arg + "):ustring", "--", "kpemu-hello");
        assertEquals(3, r.code(), r.err());
        assertEquals("kpemu-hello: open gave -1\n", r.err(), "the program's line (the file is not there)");
        Pattern event = Pattern.compile("^\\s*(\\S+)-\\d+\\s+\\[000\\] \\S+\\s+[\\d.]+: myopen: \\(do_sys_openat2\\+0x0/0x[0-9a-f]+\\) fn=\"/etc/kpemu-probe-me\"$");
        List<String> mine = r.out().lines().filter(l -> event.matcher(l).matches()).toList();
        assertEquals(1, mine.size(), r.out());
        Matcher m = event.matcher(mine.getFirst());
        assertTrue(m.matches());
        assertEquals("kpemu-hello", m.group(1), "the event's task is the program: " + mine.getFirst());
    }

    /** The static C compiler for a guest of {@code arch}, installed by the project's script when missing. */
    static String staticCompiler(Arch arch) throws Exception {
        Path script = Path.of(System.getProperty("kpemu.root", "."), "guest-images", "static-cc.sh");
        Process p = new ProcessBuilder("bash", script.toString(), arch.linuxName()).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        String cc = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertEquals(0, p.waitFor(), "guest-images/static-cc.sh " + arch.linuxName() + " could not provide a compiler");
        return cc;
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void timeoutStopsAnIdleGuestAtTheLimit(Arch arch) {
        for (String limit : List.of("1", "3")) {
            Run r = kpemu("boot", "--arch", arch.linuxName(), "--timeout", limit, "--", "sleep", "100");
            assertEquals(4, r.code(), r.err());
            Matcher m = Pattern.compile("kpemu: timeout after ([\\d.]+) guest seconds \\(exit 4\\); guest ([\\d.]+) s").matcher(r.err());
            assertTrue(m.find(), r.err());
            assertEquals(limit + ".000", m.group(2), "stopped at the limit in guest time (ms precision)");
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void sigintStopsCleanlyWithTheProfilePrinted(Arch arch, @TempDir Path tmp) throws Exception {
        Path out = tmp.resolve("stdout"), err = tmp.resolve("stderr");
        // A process started with SIGINT ignored keeps it ignored (so does the JVM): a shell's
        // background jobs are started that way, and so is this test when the suite runs as one.
        // env(1) gives kpemu SIGINT's default disposition, as a terminal's foreground job has it.
        List<String> cmd = new ArrayList<>(List.of("env", "--default-signal=INT"));
        cmd.addAll(kpemuProcess("boot", "--arch", arch.linuxName(), "-e", "p:myopen do_sys_openat2", "--profile",
                "--", "sh", "-c", "echo started; while :; do cat /proc/version >/dev/null; done"));
        Process p = new ProcessBuilder(cmd)
                .redirectOutput(out.toFile()).redirectError(err.toFile()).start();
        try {
            waitFor(p, () -> read(err).contains("started\n"), "the command to start", err);
            assertEquals(0, new ProcessBuilder("kill", "-INT", Long.toString(p.pid())).start().waitFor());
            assertTrue(p.waitFor(PROCESS_LIMIT_SECONDS, TimeUnit.SECONDS), "kpemu did not stop after SIGINT");
        } finally {
            p.destroyForcibly();
        }
        String o = read(out), e = read(err);
        assertEquals(130, p.exitValue(), e);
        assertTrue(o.contains("kpemu: kprobe_profile\n"), o);
        Matcher hits = Pattern.compile("(?m)^  myopen\\s+(\\d+)\\s+0$").matcher(o);
        assertTrue(hits.find() && Long.parseLong(hits.group(1)) > 0, o);
        assertTrue(e.lines().anyMatch(l -> l.matches("kpemu: stopped by SIGINT at guest [\\d.]+ s \\(exit 130\\)")), e);
        assertTrue(!e.contains("Exception"), e);
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void interactiveSessionThroughAPty(Arch arch, @TempDir Path tmp) throws Exception {
        Path recorded = tmp.resolve("typed.jsonl");
        String cmd = String.join(" ", kpemuProcess("boot", "--arch", arch.linuxName(), "-i", "--record-input", recorded.toString())
                .stream().map(GuestCommandTest::quote).toList());
        Path screen = tmp.resolve("screen");
        // script(1) gives kpemu a pty; what the test writes to script's stdin is typed into it
        Process p = new ProcessBuilder("script", "-q", "-e", "-c", cmd, "/dev/null")
                .redirectOutput(screen.toFile()).redirectErrorStream(true).start();
        try (OutputStream keys = p.getOutputStream()) {
            waitFor(p, () -> read(screen).contains("# "), "the shell's prompt", screen);
            type(keys, "echo hi-$((40+2))\r");
            waitFor(p, () -> read(screen).contains("\nhi-42\r"), "the shell's answer", screen);
            // busybox's line editor reads keys with ISIG off and restores the terminal only after Enter: a Ctrl-C
            // typed before the command runs is queued as a plain byte. Output from the command line shows it runs.
            type(keys, "echo sleeping; sleep 1000\r");
            waitFor(p, () -> read(screen).contains("\nsleeping\r"), "sleep to start", screen);
            type(keys, "\003");                           // Ctrl-C: SIGINT for the guest's foreground job
            type(keys, "echo back\r");
            waitFor(p, () -> read(screen).contains("\nback\r"), "the shell after Ctrl-C", screen);
            type(keys, "\001x");                          // Ctrl-A x: kpemu stops
            assertTrue(p.waitFor(PROCESS_LIMIT_SECONDS, TimeUnit.SECONDS), "kpemu did not stop on Ctrl-A x");
        } finally {
            p.destroyForcibly();
        }
        assertEquals(0, p.exitValue(), read(screen));
        assertTrue(read(screen).contains("kpemu: stopped: Ctrl-A x at guest "), read(screen));

        // what was typed, with its guest times, replays the session without a terminal: Ctrl-C included
        String typed = Files.readString(recorded);
        StringBuilder texts = new StringBuilder();       // keys may be split over several polls
        for (Matcher t = Pattern.compile("\"text\":\"((?:[^\"\\\\]|\\\\.)*)\"").matcher(typed); t.find(); ) texts.append(t.group(1));
        assertTrue(texts.toString().contains("echo hi-$((40+2))\\r") && typed.strip().endsWith("\"stop\":true}"), typed);
        Path output = tmp.resolve("replayed");
        Run r = kpemu("boot", "--arch", arch.linuxName(), "--input", recorded.toString(), "--command-output", output.toString());
        assertEquals(0, r.code(), r.err());
        String replayed = Files.readString(output, StandardCharsets.ISO_8859_1);
        assertTrue(replayed.contains("\r\nhi-42\r\n") && replayed.contains("\r\nback\r\n"), replayed);
        assertTrue(r.err().contains("kpemu: stopped: end of the recorded input at guest "), r.err());
    }

    @org.junit.jupiter.api.Test
    void sigtermStopsCleanlyWithExit143(@TempDir Path tmp) throws Exception {
        Path out = tmp.resolve("stdout"), err = tmp.resolve("stderr");
        Process p = new ProcessBuilder(kpemuProcess("boot", "--arch", "x86_64", "-e", "p:myopen do_sys_openat2", "--list",
                "--", "sh", "-c", "echo started; while :; do cat /proc/version >/dev/null; done"))
                .redirectOutput(out.toFile()).redirectError(err.toFile()).start();
        try {
            waitFor(p, () -> read(err).contains("started\n"), "the command to start", err);
            assertEquals(0, new ProcessBuilder("kill", "-TERM", Long.toString(p.pid())).start().waitFor());
            assertTrue(p.waitFor(PROCESS_LIMIT_SECONDS, TimeUnit.SECONDS), "kpemu did not stop after SIGTERM");
        } finally {
            p.destroyForcibly();
        }
        assertEquals(143, p.exitValue(), read(err));
        assertTrue(read(out).contains("kpemu: kprobes/list\n"), read(out));
        assertTrue(read(err).lines().anyMatch(l -> l.matches("kpemu: stopped by SIGTERM at guest [\\d.]+ s \\(exit 143\\)")), read(err));
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void replayedInputGivesByteIdenticalOutputTwice(Arch arch, @TempDir Path tmp) throws Exception {
        Path input = Files.writeString(tmp.resolve("input.jsonl"), """
                {"guest_ns":3000000000,"text":"echo replay-$((6*7))\\r"}
                {"guest_ns":3500000000,"text":"exit 3\\r"}
                """);
        byte[][] outputs = new byte[2][], consoles = new byte[2][];
        for (int i = 0; i < 2; i++) {
            Path output = tmp.resolve("output" + i), console = tmp.resolve("console" + i);
            Run r = kpemu("boot", "--arch", arch.linuxName(), "--input", input.toString(), "--command-output", output.toString(),
                    "--console", console.toString());
            assertEquals(3, r.code(), r.err());
            outputs[i] = Files.readAllBytes(output);
            consoles[i] = Files.readAllBytes(console);
        }
        String text = new String(outputs[0], StandardCharsets.UTF_8);
        assertTrue(text.contains("echo replay-$((6*7))\r\nreplay-42\r\n"), text);
        assertArrayEquals(outputs[0], outputs[1], "the terminal's bytes");
        assertArrayEquals(consoles[0], consoles[1], "the kernel console's bytes, timestamps included");
    }

    static void type(OutputStream keys, String s) throws IOException {
        keys.write(s.getBytes(StandardCharsets.UTF_8));
        keys.flush();
    }

    static String quote(String s) { return "'" + s.replace("'", "'\\''") + "'"; }

    static String read(Path p) {
        try {
            return Files.exists(p) ? Files.readString(p, StandardCharsets.ISO_8859_1) : "";
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** Polls until {@code done} (the process still running); fails with what {@code shown} holds. */
    static void waitFor(Process p, java.util.function.BooleanSupplier done, String what, Path shown) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(PROCESS_LIMIT_SECONDS);
        while (!done.getAsBoolean()) {
            if (!p.isAlive()) fail("kpemu ended (exit " + p.exitValue() + ") before " + what + ":\n" + read(shown));
            if (System.nanoTime() > until) fail("no " + what + " after " + PROCESS_LIMIT_SECONDS + " s:\n" + read(shown));
            Thread.sleep(200);
        }
    }
}
