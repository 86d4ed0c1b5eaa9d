package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * {@code kpemu boot --events-file} with uprobe definitions against Linux's own trace
 * ({@code guest-images/reference/ARCH/6.1/uprobes.trace}, record-uprobes.sh): the recording's
 * definitions and workload (an initramfs whose /init runs it as the recording's does) through the
 * CLI. Every line Linux printed is kpemu's line but for the task column (Linux prints its saved
 * comm of the pid), the pid, the need-resched character, the user stack addresses (ASLR) and the
 * timestamp. With {@code --uprobes-in-workload} the events are enabled where the recording enables
 * them, around the workload (after the /init's start marker, before its done marker): the whole
 * trace is Linux's. Without it they are live from the registration point
 * ({@code run_init_process}): init's shell and its {@code mount} start busybox before the workload
 * and {@code poweroff} after it, three more {@code ustart} lines. {@code --profile} and
 * {@code --list} print {@code uprobe_profile} and {@code uprobe_events}.
 */
@Tag("kernel")
class UprobeBootCommandTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void recordedUprobeEventsThroughTheCli(Arch arch, @TempDir Path tmp) throws Exception {
        GuestImages images = GuestImages.forRepository();
        String release = images.kernelVersion(arch).get("release");
        Assumptions.assumeTrue(release.startsWith("6.1."), "recorded for Debian 12's 6.1 here; booted " + release);
        Path trace = NativeLibraries.repositoryRoot().resolve("guest-images/reference/" + arch.linuxName() + "/6.1/uprobes.trace");
        List<String> lines = Files.readAllLines(trace);
        Assumptions.assumeTrue(lines.stream().anyMatch(l -> l.startsWith("# kernel: " + release + " ")), "recorded on another build than " + release);

        List<String> defs = lines.stream().filter(l -> l.startsWith("#   ")).map(l -> l.substring(4)).toList();
        Path events = Files.writeString(tmp.resolve("uprobes.events"), String.join("\n", defs) + "\n");
        String init = """
                #!/bin/sh
                export PATH=/bin
                mount -t proc proc /proc
                echo %s
                /bin/busybox true
                /bin/busybox true
                busybox true one two
                echo %s
                poweroff -f
                """.formatted(Initramfs.MARK_START, Initramfs.MARK_DONE);
        Path initrd = tmp.resolve("uprobes.cpio");
        Initramfs.defaultGuest(Files.readAllBytes(images.busybox(arch))).file("init", 0755, init).write(initrd);

        CliTest.Run r = CliTest.run("boot", "--arch", arch.linuxName(), "--initrd", initrd.toString(),
                "--events-file", events.toString(), "--uprobes-in-workload", "--profile", "--list");
        assertEquals(ExitCodes.OK, r.code(), r.out() + r.err());
        List<String> out = r.out().lines().toList();
        List<String> trace2 = out.stream().takeWhile(l -> !l.startsWith("kpemu: ")).map(l -> normalized(l, arch)).toList();
        List<String> linux = lines.stream().filter(l -> !l.startsWith("#") && !l.startsWith("%")).map(l -> normalized(l, arch)).toList();
        assertEquals(String.join("\n", linux), String.join("\n", trace2));

        // uprobe_profile: true_main runs only in the workload (Linux's counts); _start's count is kpemu's window's
        int p = out.indexOf("kpemu: uprobe_profile");
        assertTrue(p >= 0, r.out());
        for (String l : lines) {
            if (!l.startsWith("% ")) continue;
            String want = l.substring(2);
            if (want.contains(" ustart ")) assertTrue(out.get(p + 1).startsWith(want.replaceFirst("\\s+\\d+$", "")), out.get(p + 1));
            else assertTrue(out.subList(p + 1, p + 5).contains(want), want + " in\n" + r.out());
        }
        int ls = out.indexOf("kpemu: uprobe_events");
        assertTrue(ls >= 0, r.out());
        assertTrue(out.get(ls + 1).startsWith("p:uprobes/ustart /bin/busybox:0x000000000000"), out.get(ls + 1));
        assertTrue(out.get(ls + 4).startsWith("r:uprobes/p_busybox_0x"), out.get(ls + 4));

        // JSON, probes live from the registration point: Linux's records and three more ustart
        // (init's shell, its mount, poweroff), typed uprobe / uretprobe, the return's addresses as Linux printed them
        CliTest.Run j = CliTest.run("boot", "--arch", arch.linuxName(), "--initrd", initrd.toString(),
                "--events-file", events.toString(), "--format", "json");
        assertEquals(ExitCodes.OK, j.code(), j.err());
        var mapper = new com.fasterxml.jackson.databind.ObjectMapper();
        List<com.fasterxml.jackson.databind.JsonNode> records = new ArrayList<>();
        for (String l : j.out().lines().toList()) records.add(mapper.readTree(l));
        assertEquals(trace2.size() + 3, records.size(), j.out());
        assertEquals(List.of("/bin/sh", "mount", "poweroff"), java.util.stream.Stream.of(records.get(0), records.get(1), records.getLast())
                .map(n -> n.get("args").get("arg4").asText()).toList(), j.out());
        java.util.regex.Matcher ret = java.util.regex.Pattern.compile(" uret: \\((0x[0-9a-f]+) <- (0x[0-9a-f]+)\\)").matcher(String.join("\n", linux));
        assertTrue(ret.find(), "Linux's uret line");
        var uret = records.stream().filter(n -> n.get("event").asText().equals("uret")).findFirst().orElseThrow();
        assertEquals("uretprobe", uret.get("probe").get("type").asText());
        assertEquals(ret.group(1), uret.get("probe").get("ret_ip").asText());
        assertEquals(ret.group(2), uret.get("probe").get("func").asText());
        assertTrue(records.stream().filter(n -> n.get("event").asText().equals("ustart")).allMatch(n -> n.get("probe").get("type").asText().equals("uprobe")), j.out());
    }

    /** What is not compared against Linux (UprobeEventsBootTest's rule): task column, pid, need-resched, stack addresses, timestamp. */
    static String normalized(String line, Arch arch) {
        String s = line.replaceFirst("^\\s*\\S+-\\d+\\s+(\\[\\d+\\] )(\\S)\\S(\\S+)(\\s+\\d+\\.\\d+:)? ", "TASK-PID $1$2?$3 ");
        return arch == Arch.X86_64 ? s.replaceAll("0x7ff[0-9a-f]{9}\\b", "0xSTACK") : s.replaceAll("0xffff[0-9a-f]{8}\\b", "0xSTACK");
    }
}
