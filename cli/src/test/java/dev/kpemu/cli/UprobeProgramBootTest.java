package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.image.GuestImages;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * A user's static C program ({@code guest-images/programs/uprobe-target.c}) added with
 * {@code kpemu boot --add PROG -e ... -- /uprobe-target}, against Linux's own trace of the same
 * build of it on the booted kernel ({@code guest-images/reference/ARCH/SERIES/uprobes-prog.trace},
 * record-uprobes-prog.sh): probes registered before the program starts; {@code greet}'s entry with
 * register, string and {@code $comm} fetchargs, called in a loop and by a forked child; an entry and
 * a return probe on the recursive {@code fact}, whose returns fire innermost first, as Linux's; a
 * probe inside {@code fact}'s first block ({@code fact+8}: not a block start); entry and return
 * probes on {@code dive}, whose first recursion a {@code longjmp} leaves from its innermost call
 * (Linux drops those return instances without an event) before a second one returns. The
 * definitions once by offset (Linux's form) and once by symbol (kpemu's {@code PATH:SYMBOL}): the
 * same trace; an unknown symbol is refused in one line. Not compared, as in UprobeBootCommandTest:
 * the task column and the pid (the child's pid is checked to be another than its parent's), the
 * need-resched character and the timestamp; on arm64 7.x the latency column (uprobe-notes.md: open).
 * The recording's program must be the build the test makes (its sha256 is in the recording's header:
 * another compiler gives other offsets).
 */
@Tag("kernel")
class UprobeProgramBootTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void usersProgramTracedAsLinuxTracesIt(Arch arch, @TempDir Path tmp) throws Exception {
        GuestImages images = GuestImages.forRepository();
        String release = images.kernelVersion(arch).get("release");
        Matcher series = Pattern.compile("^(\\d+\\.\\d+)").matcher(release);
        assertTrue(series.find(), release);
        Path trace = NativeLibraries.repositoryRoot().resolve("guest-images/reference/" + arch.linuxName() + "/" + series.group(1) + "/uprobes-prog.trace");
        Assumptions.assumeTrue(Files.exists(trace), "no recording for " + release);
        List<String> lines = Files.readAllLines(trace);
        Assumptions.assumeTrue(lines.stream().anyMatch(l -> l.startsWith("# kernel: " + release + " ")), "recorded on another build than " + release);

        Path prog = buildProgram(arch);
        String header = lines.stream().filter(l -> l.startsWith("# program: ")).findFirst().orElseThrow();
        Matcher h = Pattern.compile("sha256 ([0-9a-f]{16}); @FACT@ = (0x[0-9a-f]+) \\(fact\\), @GREET@ = (0x[0-9a-f]+) \\(greet\\)").matcher(header);
        assertTrue(h.find(), header);
        String sha = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(prog))).substring(0, 16);
        Assumptions.assumeTrue(sha.equals(h.group(1)), "the recording's program is another build (" + h.group(1) + ") than this host's compiler made (" + sha + ")");

        List<String> defs = lines.stream().filter(l -> l.startsWith("#   ")).map(l -> l.substring(4)).toList();
        boolean flagsOpen = false;   // every pair's column is compared (arm64 7.x's too: LatencyLayout.userColumn)
        List<String> linux = lines.stream().filter(l -> !l.startsWith("#") && !l.startsWith("%") && !l.startsWith(">"))
                .map(l -> normalized(l, flagsOpen)).toList();
        List<String> output = lines.stream().filter(l -> l.startsWith("> ")).map(l -> l.substring(2)).toList();

        // by offset, as Linux takes it
        Path byOffset = Files.writeString(tmp.resolve("offsets.events"), String.join("\n", defs) + "\n");
        CliTest.Run r = CliTest.run("boot", "--arch", arch.linuxName(), "--add", prog.toString(), "--events-file", byOffset.toString(),
                "--profile", "--", "/uprobe-target");
        assertEquals(ExitCodes.OK, r.code(), r.out() + r.err());
        List<String> out = r.out().lines().toList();
        List<String> kpemu = out.stream().takeWhile(l -> !l.startsWith("kpemu: ")).toList();
        assertEquals(String.join("\n", linux), String.join("\n", kpemu.stream().map(l -> normalized(l, flagsOpen)).toList()));
        assertNotEquals(pid(kpemu.getFirst()), pid(kpemu.getLast()), "the child's greet has the child's pid");
        assertTrue(r.err().lines().toList().containsAll(output), "the program's output:\n" + r.err());
        int p = out.indexOf("kpemu: uprobe_profile");
        assertTrue(p >= 0, r.out());
        List<String> profile = lines.stream().filter(l -> l.startsWith("% ")).map(l -> l.substring(2)).toList();
        assertEquals(profile, out.subList(p + 1, p + 1 + profile.size()));

        // by symbol (kpemu's extension): the same trace, the resolution noted in --list
        String factMid = "0x" + Long.toHexString(Long.decode(h.group(2)) + 8);
        Matcher dive = Pattern.compile("@DIVE@ = (0x[0-9a-f]+) \\(dive\\)").matcher(header);
        assertTrue(dive.find(), header);
        List<String> bySymbolDefs = defs.stream().map(d -> d.replace("/uprobe-target:" + h.group(2) + " ", "/uprobe-target:fact ")
                .replace("/uprobe-target:" + h.group(3) + " ", "/uprobe-target:greet ")
                .replace("/uprobe-target:" + factMid + " ", "/uprobe-target:fact+8 ")
                .replace("/uprobe-target:" + dive.group(1) + " ", "/uprobe-target:dive ")).toList();
        assertTrue(bySymbolDefs.stream().allMatch(d -> d.matches(".*:(fact|greet|fact\\+8|dive) .*")), bySymbolDefs.toString());
        Path bySymbol = Files.writeString(tmp.resolve("symbols.events"), String.join("\n", bySymbolDefs) + "\n");
        CliTest.Run s = CliTest.run("boot", "--arch", arch.linuxName(), "--add", prog.toString(), "--events-file", bySymbol.toString(),
                "--list", "--", "/uprobe-target");
        assertEquals(ExitCodes.OK, s.code(), s.out() + s.err());
        List<String> sout = s.out().lines().toList();
        assertEquals(String.join("\n", linux), String.join("\n", sout.stream().takeWhile(l -> !l.startsWith("kpemu: ")).map(l -> normalized(l, flagsOpen)).toList()));
        assertTrue(sout.contains("kpemu: /uprobe-target:fact = /uprobe-target:" + h.group(2) + " (PATH:SYMBOL, kpemu's extension: Linux's uprobe_events takes only offsets)"), s.out());
        assertTrue(sout.stream().anyMatch(l -> l.startsWith("p:uprobes/ufact /uprobe-target:0x" + "%016x".formatted(Long.decode(h.group(2))) + " ")), s.out());

        CliTest.Run u = CliTest.run("boot", "--arch", arch.linuxName(), "--add", prog.toString(), "-e", "p /uprobe-target:no_such_function", "--", "/uprobe-target");
        assertEquals(ExitCodes.USAGE, u.code(), u.out() + u.err());
        assertEquals("kpemu: /uprobe-target: no symbol 'no_such_function' in its .symtab or .dynsym", u.err().strip());
    }

    /** The program built by guest-images/build-uprobe-target.sh into kpemu's cache (as the recording script builds it). */
    static Path buildProgram(Arch arch) throws Exception {
        Path root = NativeLibraries.repositoryRoot();
        Path out = NativeLibraries.cacheDirectory().resolve("uprobe-target/" + arch.linuxName() + "/uprobe-target");
        Process b = new ProcessBuilder("bash", root.resolve("guest-images/build-uprobe-target.sh").toString(), arch.linuxName(), out.toString())
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        String built = new String(b.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertEquals(0, b.waitFor(), "guest-images/build-uprobe-target.sh " + arch.linuxName() + " could not build the program");
        return Path.of(built);
    }

    private static String pid(String line) {
        Matcher m = Pattern.compile("^\\s*\\S+-(\\d+)\\s").matcher(line);
        assertTrue(m.find(), line);
        return m.group(1);
    }

    /**
     * What is not compared: task column and pid, need-resched character, timestamp. With
     * CONFIG_PREEMPTION (x86-64) the uprobe's context word is borrowed through ({@code ff}): the
     * decrement then runs through the need-resched bits into the irq and hardirq characters, which
     * so depend on the timer too (UprobeEventsBootTest's rule); where open, the whole column.
     */
    static String normalized(String line, boolean flagsOpen) {
        String s = line.replaceFirst("^\\s*\\S+-\\d+\\s+(\\[\\d+\\] )(\\S)\\S(\\S+)(\\s+\\d+\\.\\d+:)? ", "TASK-PID $1$2?$3 ");
        if (flagsOpen) return s.replaceFirst("^TASK-PID (\\[\\d+\\] )\\S+ ", "TASK-PID $1FLAGS ");
        return s.replaceFirst("^(TASK-PID \\[\\d+\\] )\\S\\?\\Sff ", "$1???ff ");
    }
}
