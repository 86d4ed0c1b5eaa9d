package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
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
 * A dynamically linked program and a probe in Debian's C library, against Linux's own trace of the
 * same files on the booted kernel ({@code guest-images/reference/ARCH/SERIES/uprobes-dyn.trace},
 * record-uprobes-dyn.sh): {@code uprobe-target.c} built without {@code -static}
 * (build-uprobe-target-dyn.sh), added with the loader and {@code libc.so.6} of Debian's libc6 for
 * the guest's arch; an entry probe in the program and an entry and a return probe on libc's
 * {@code printf}, which the loader maps with {@code mmap} (not exec), in the parent and in its
 * forked child; address-space randomisation off on both sides, so the addresses are compared too.
 * Once by offset (Linux's form), once by symbol ({@code PATH:SYMBOL}, libc's from its
 * {@code .dynsym}). Not compared, as in UprobeProgramBootTest: task and pid, need-resched
 * character, timestamp. The recording's files must be the ones this host builds (their sha256 is
 * in the header).
 */
@Tag("kernel")
class UprobeDynamicBootTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void dynamicProgramAndLibcTracedAsLinuxTracesThem(Arch arch, @TempDir Path tmp) throws Exception {
        GuestImages images = GuestImages.forRepository();
        String release = images.kernelVersion(arch).get("release");
        Matcher series = Pattern.compile("^(\\d+\\.\\d+)").matcher(release);
        assertTrue(series.find(), release);
        Path trace = NativeLibraries.repositoryRoot().resolve("guest-images/reference/" + arch.linuxName() + "/" + series.group(1) + "/uprobes-dyn.trace");
        Assumptions.assumeTrue(Files.exists(trace), "no recording for " + release);
        List<String> lines = Files.readAllLines(trace);
        Assumptions.assumeTrue(lines.stream().anyMatch(l -> l.startsWith("# kernel: " + release + " ")), "recorded on another build than " + release);

        List<String> adds = build(arch);
        String header = lines.stream().filter(l -> l.startsWith("# program: ")).findFirst().orElseThrow();
        Matcher h = Pattern.compile("sha256 ([0-9a-f]{16}); libc: (\\S+) \\(.*\\), sha256 ([0-9a-f]{16}); @GREET@ = (0x[0-9a-f]+) \\(greet\\), @PRINTF@ = (0x[0-9a-f]+) \\(printf\\)").matcher(header);
        assertTrue(h.find(), header);
        Assumptions.assumeTrue(sha(adds.get(0)).equals(h.group(1)) && sha(adds.get(2)).equals(h.group(3)),
                "the recording's program or libc is another build than this host's");
        assertEquals(h.group(2), adds.get(2).substring(adds.get(2).indexOf(':') + 1), "libc's place in the guest");

        List<String> defs = lines.stream().filter(l -> l.startsWith("#   ")).map(l -> l.substring(4)).toList();
        List<String> linux = lines.stream().filter(l -> !l.startsWith("#") && !l.startsWith("%") && !l.startsWith(">"))
                .map(l -> UprobeProgramBootTest.normalized(l, false)).toList();
        List<String> profile = lines.stream().filter(l -> l.startsWith("% ")).map(l -> l.substring(2)).toList();

        Path byOffset = Files.writeString(tmp.resolve("offsets.events"), String.join("\n", defs) + "\n");
        List<String> out = boot(arch, adds, byOffset, "--profile");
        List<String> kpemu = out.stream().takeWhile(l -> !l.startsWith("kpemu: ")).map(l -> UprobeProgramBootTest.normalized(l, false)).toList();
        assertEquals(String.join("\n", linux), String.join("\n", kpemu));
        int p = out.indexOf("kpemu: uprobe_profile");
        assertTrue(p >= 0, String.join("\n", out));
        assertEquals(profile, out.subList(p + 1, p + 1 + profile.size()));

        // by symbol: greet from the program's .symtab, printf from libc's .dynsym
        List<String> bySymbolDefs = defs.stream().map(d -> d.replace("/uprobe-target-dyn:" + h.group(4) + " ", "/uprobe-target-dyn:greet ")
                .replace(h.group(2) + ":" + h.group(5) + " ", h.group(2) + ":printf ")).toList();
        assertTrue(bySymbolDefs.stream().allMatch(d -> d.matches("\\S+ \\S+:(greet|printf) .*")), bySymbolDefs.toString());
        Path bySymbol = Files.writeString(tmp.resolve("symbols.events"), String.join("\n", bySymbolDefs) + "\n");
        List<String> sout = boot(arch, adds, bySymbol, "--list");
        assertEquals(String.join("\n", linux), String.join("\n", sout.stream().takeWhile(l -> !l.startsWith("kpemu: "))
                .map(l -> UprobeProgramBootTest.normalized(l, false)).toList()));
        assertTrue(sout.contains("kpemu: " + h.group(2) + ":printf = " + h.group(2) + ":" + h.group(5)
                + " (PATH:SYMBOL, kpemu's extension: Linux's uprobe_events takes only offsets)"), String.join("\n", sout));
    }

    private static List<String> boot(Arch arch, List<String> adds, Path events, String option) {
        List<String> args = new ArrayList<>(List.of("boot", "--arch", arch.linuxName()));
        for (String a : adds) args.addAll(List.of("--add", a));
        args.addAll(List.of("--events-file", events.toString(), option, "--",
                "sh", "-c", "echo 0 > /proc/sys/kernel/randomize_va_space; /uprobe-target-dyn"));
        CliTest.Run r = CliTest.run(args.toArray(String[]::new));
        assertEquals(ExitCodes.OK, r.code(), r.out() + r.err());
        assertTrue(r.err().contains("child exited 0"), "the program ran to its end:\n" + r.err());
        return r.out().lines().toList();
    }

    /** The program, loader and libc as build-uprobe-target-dyn.sh gives them (HOST:GUEST, in that order). */
    static List<String> build(Arch arch) throws Exception {
        Path root = NativeLibraries.repositoryRoot();
        Path dir = NativeLibraries.cacheDirectory().resolve("uprobe-target-dyn/" + arch.linuxName());
        Process b = new ProcessBuilder("bash", root.resolve("guest-images/build-uprobe-target-dyn.sh").toString(), arch.linuxName(), dir.toString())
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        List<String> files = new String(b.getInputStream().readAllBytes(), StandardCharsets.UTF_8).lines().toList();
        assertEquals(0, b.waitFor(), "guest-images/build-uprobe-target-dyn.sh " + arch.linuxName() + " could not build the program");
        assertEquals(3, files.size(), files.toString());
        return files;
    }

    private static String sha(String add) throws Exception {
        Path host = Path.of(add.substring(0, add.indexOf(':')));
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(host))).substring(0, 16);
    }
}
