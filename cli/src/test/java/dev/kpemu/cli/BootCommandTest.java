package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BootCommandTest {
    @Test
    void badArgumentsAreUsageErrors() {
        assertEquals(ExitCodes.USAGE, CliTest.run("boot").code(), "--arch is required");
        assertEquals(ExitCodes.USAGE, CliTest.run("boot", "--arch", "sparc").code());
        assertEquals(ExitCodes.USAGE, CliTest.run("boot", "--arch", "arm64", "--memory", "16").code());
        assertEquals(ExitCodes.USAGE, CliTest.run("boot", "--arch", "arm64", "--timeout", "0").code());
    }

    @Test
    void memoryTheBoardsCannotGiveIsRefusedUpFrontWithTheLargest() {
        // once an OutOfMemoryError stack trace (mmap of 95 TiB)
        CliTest.Run r = CliTest.run("boot", "--arch", "x86_64", "--memory", "99999999");
        assertEquals(ExitCodes.USAGE, r.code(), r.out() + r.err());
        assertTrue(r.err().lines().findFirst().orElse("").equals(
                "kpemu: --memory 99999999 MiB is more than kpemu's boards give; the largest is 131072 MiB"), r.err());
        assertTrue(!r.err().contains("Exception") && !r.err().contains("Error") && !r.err().contains("\tat "), r.err());
        assertEquals(ExitCodes.USAGE, CliTest.run("boot", "--arch", "arm64", "--memory", "131073").code());
        // several x86-64 CPUs: the APIC board, whose RAM ends at the I/O APIC (once "kpemu: ioapic overlaps ram")
        CliTest.Run apic = CliTest.run("boot", "--arch", "x86_64", "--cpus", "2", "--memory", "8192");
        assertEquals(ExitCodes.USAGE, apic.code(), apic.out() + apic.err());
        assertTrue(apic.err().lines().findFirst().orElse("").contains("the largest is 4076 MiB"), apic.err());
    }

    @Test
    @Tag("kernel")
    void x86GuestWithMoreThan21GiBKeepsItsCommandLine(@TempDir Path tmp) throws Exception {
        // 30000 MiB once powered off with an empty console: the boot page tables for all of RAM
        // (a page per GiB from 0x9000) overwrote the command line at 0x20000, so console=ttyS0 was lost
        Path console = tmp.resolve("console.txt");
        CliTest.Run r = CliTest.run("boot", "--arch", "x86_64", "--memory", "30000", "--console", console.toString(), "--", "true");
        String con = Files.readString(console, StandardCharsets.ISO_8859_1);
        assertEquals(ExitCodes.OK, r.code(), r.out() + r.err() + "\n" + con);
        assertTrue(con.lines().anyMatch(l -> l.contains("Command line:") && l.contains("console=ttyS0")), con);
        // the local and I/O APICs' window below 4 GiB is no RAM for the kernel, as on a PC
        assertTrue(con.lines().anyMatch(l -> l.contains("BIOS-e820: [mem 0x00000000fec00000-0x00000000ffffffff] reserved")), con);
    }

    @Test
    void missingKernelIsAnError(@TempDir Path tmp) {
        CliTest.Run r = CliTest.run("boot", "--arch", "arm64", "--kernel", tmp.resolve("nope").toString(),
                "--initrd", tmp.resolve("nope2").toString());
        assertEquals(ExitCodes.ERROR, r.code(), r.out() + r.err());
        assertTrue(r.err().startsWith("kpemu: "), r.err());
    }

    @Test
    @Tag("kernel")
    void arm64BootsToPowerOff(@TempDir Path tmp) throws Exception {
        Path console = tmp.resolve("console.txt");
        CliTest.Run r = CliTest.run("boot", "--arch", "arm64", "--console", console.toString());
        String con = Files.readString(console, StandardCharsets.ISO_8859_1);
        assertEquals(ExitCodes.OK, r.code(), r.out() + "\n" + con);
        assertTrue(con.contains("KPEMU-INIT-DONE"), con);
        assertTrue(r.err().contains("guest powered off"), r.err());
        assertEquals("", r.out(), "no probes: nothing on stdout (kpemu's own lines go to stderr)");
    }

    @Test
    void wrongArchitectureKernelIsAOneLineError() throws Exception {
        Path x86 = dev.kpemu.image.GuestImages.forRepository().kernel(dev.kpemu.machine.Arch.X86_64);
        CliTest.Run r = CliTest.run("boot", "--arch", "arm64", "--kernel", x86.toString());
        assertEquals(ExitCodes.ERROR, r.code(), r.out() + r.err());
        assertEquals(1, r.err().lines().count(), r.err());
        assertTrue(r.err().startsWith("kpemu: "), r.err());
    }

    @Test
    void badProbeDefinitionStopsBeforeBootWithTheKernelsErrorLog() {
        CliTest.Run r = CliTest.run("boot", "--arch", "x86_64", "-e", "p:bad do_sys_openat2 x=%xx");
        assertEquals(ExitCodes.USAGE, r.code(), r.out() + r.err());
        assertTrue(r.err().lines().anyMatch(l -> l.startsWith("trace_kprobe: error: Invalid register name")), r.err());   // after kpemu's own lines, also on stderr
        assertTrue(!r.err().contains("guest powered off"), "the guest never ran: " + r.err());
    }

    /** A filter Linux refuses stops the boot before it starts, with the error_log entry Linux 6.1 made (guest-images/reference/x86_64/6.1/filters.filter-errors). */
    @Test
    void badFilterStopsBeforeBootWithLinuxOwnParseError() {
        CliTest.Run r = CliTest.run("boot", "--arch", "x86_64", "-e", "p:myopen do_sys_openat2 dfd=%di:s32 fn=+0(%si):ustring",
                "--filter", "myopen:nosuch == 1");
        assertEquals(ExitCodes.USAGE, r.code(), r.out() + r.err());
        assertTrue(r.err().contains("\nevent filter parse error: error: Field not found\n  Command: nosuch == 1\n                  ^\n"), r.err());
        assertTrue(r.err().lines().anyMatch(l -> l.startsWith("kpemu: --filter myopen: Field not found")), r.err());
        assertTrue(!r.err().contains("guest powered off"), "the guest never ran: " + r.err());
        assertEquals("", r.out());
    }

    @Test
    void badOutputOptionsAreUsageErrors() {
        String def = "p:myopen do_sys_openat2";
        for (String[] args : new String[][] {
                {"--format", "xml"}, {"--format", "json", "--perfetto", "-"}, {"--filter", "no-colon"}, {"--trigger", "myopen:"}, {"--filter", "nosuchevent:x == 1"},
                {"--trigger", "myopen:hist:keys=nosuch"}, {"--disable", "nosuchevent"}}) {
            List<String> argv = new ArrayList<>(List.of("boot", "--arch", "x86_64", "-e", def));
            argv.addAll(List.of(args));
            CliTest.Run r = CliTest.run(argv.toArray(String[]::new));
            assertEquals(ExitCodes.USAGE, r.code(), String.join(" ", args) + ": " + r.out() + r.err());
            assertTrue(r.err().startsWith("kpemu: ") || r.err().contains("--"), r.err());
            assertTrue(!r.err().contains("Exception") && !r.err().contains("\tat "), "no stack trace: " + r.err());
            assertEquals("", r.out());
        }
        assertEquals(ExitCodes.USAGE, CliTest.run("boot", "--arch", "x86_64", "--filter", "e:x == 1").code(), "a filter needs definitions");
    }

    @Test
    @Tag("kernel")
    void demoPrintsTheOpenPathTraceAndTheProfile() {
        CliTest.Run r = CliTest.run("demo", "--arch", "arm64");
        assertEquals(ExitCodes.OK, r.code(), r.out() + r.err());
        assertTrue(r.out().contains("myopen: (do_sys_openat2+0x0/0x190) dfd=0xffffffffffffff9c fn=\"/hello.txt\""), r.out());
        assertTrue(r.out().contains("myret: (__arm64_sys_openat+0x70/0xbc <- do_sys_openat2) ret=0x3"), r.out());
        assertTrue(r.out().lines().anyMatch(l -> l.matches("\\s+myopen\\s+\\d+\\s+0")), "kprobe_profile row: " + r.out());
    }

    /** x86 optimizes by default (as Linux), --no-optimize keeps breakpoint probes; --list shows it and the verdicts. */
    @Test
    @Tag("kernel")
    void optimizeShowsInTheProbeList(@TempDir Path tmp) {
        String con = tmp.resolve("console.txt").toString();
        CliTest.Run on = CliTest.run("boot", "--arch", "x86_64", "--console", con, "-e", "p:rd ksys_read+5 fd=%di", "--list");
        assertEquals(ExitCodes.OK, on.code(), on.out() + on.err());
        assertTrue(on.out().lines().anyMatch(l -> l.contains("ksys_read+0x5") && l.endsWith("[OPTIMIZED]")), on.out());
        assertTrue(on.out().contains("optimizable, the jump displaces 5 bytes: push r13; mov r13, rsi"), on.out());
        CliTest.Run off = CliTest.run("boot", "--arch", "x86_64", "--console", con, "-e", "p:rd ksys_read+5 fd=%di", "--list", "--no-optimize");
        assertEquals(ExitCodes.OK, off.code(), off.out() + off.err());
        assertTrue(off.out().lines().anyMatch(l -> l.contains("ksys_read+0x5")) && !off.out().contains("[OPTIMIZED]"), off.out());
        CliTest.Run arm = CliTest.run("boot", "--arch", "arm64", "--console", con, "-e", "p:rd ksys_read+12 fd=%x0", "--list", "--optimize");
        assertEquals(ExitCodes.OK, arm.code(), arm.out() + arm.err());
        assertTrue(arm.out().lines().anyMatch(l -> l.contains("ksys_read+0xc") && l.endsWith("[OPTIMIZED]")), arm.out());
    }

    @Test
    void addOfAMissingPathIsAOneLineUsageError(@TempDir Path tmp) {
        CliTest.Run r = CliTest.run("boot", "--arch", "x86_64", "--add", tmp.resolve("nope") + ":/bin/nope", "--", "nope");
        assertEquals(ExitCodes.USAGE, r.code(), r.err());
        assertEquals("kpemu: " + tmp.resolve("nope") + ": no such file or directory\n", r.err());
    }

    @Test
    void addOfAnElfForTheOtherArchIsAOneLineUsageError() throws Exception {
        Path arm64Busybox = dev.kpemu.image.GuestImages.forRepository().busybox(dev.kpemu.machine.Arch.ARM64);
        CliTest.Run r = CliTest.run("boot", "--arch", "x86_64", "--add", arm64Busybox + ":/bin/bb", "--", "bb");
        assertEquals(ExitCodes.USAGE, r.code(), r.err());
        assertEquals("kpemu: " + arm64Busybox + ": an ELF file for arm64, but the guest is x86_64\n", r.err());
    }

    @Test
    void guestCommandOptionsThatDoNotGoTogetherAreUsageErrors(@TempDir Path tmp) throws Exception {
        Path in = Files.writeString(tmp.resolve("in.jsonl"), "{\"guest_ns\":1,\"text\":\"x\"}\n");
        assertEquals(ExitCodes.USAGE, CliTest.run("boot", "--arch", "x86_64", "--record-input", tmp.resolve("r").toString(), "--", "true").code());
        assertEquals(ExitCodes.USAGE, CliTest.run("boot", "--arch", "x86_64", "-i", "--input", in.toString()).code());
        assertEquals(ExitCodes.USAGE, CliTest.run("boot", "--arch", "x86_64", "--initrd", in.toString(), "--", "true").code());
        assertEquals(ExitCodes.USAGE, CliTest.run("boot", "--arch", "x86_64", "--command-output", tmp.resolve("o").toString()).code(),
                "--command-output without a command");
        CliTest.Run bad = CliTest.run("boot", "--arch", "x86_64", "--input", Files.writeString(tmp.resolve("bad"), "hello\n").toString());
        assertEquals(ExitCodes.USAGE, bad.code());
        assertEquals(1, bad.err().lines().count(), bad.err());
    }

    @Test
    void interactiveWithoutATerminalIsAUsageError() {
        CliTest.Run r = CliTest.run("boot", "--arch", "x86_64", "-i");   // the test's stdin is no terminal
        assertEquals(ExitCodes.USAGE, r.code(), r.err());
        assertTrue(r.err().startsWith("kpemu: -i needs a terminal"), r.err());
    }
}
