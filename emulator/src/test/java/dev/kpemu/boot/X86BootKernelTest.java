package dev.kpemu.boot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;

/**
 * Boots Debian's unmodified amd64 kernel (the bzImage exactly as shipped) with the default
 * busybox workload to power-off, and checks timer interrupts, guest time and kallsyms.
 */
@Tag("kernel")
class X86BootKernelTest {
    static GuestImages images;
    static Path kernel;

    @BeforeAll
    static void fetch() throws Exception {
        images = GuestImages.forRepository();
        kernel = images.kernel(Arch.X86_64);
    }

    /** Symbols the guest's /proc/kallsyms must agree on with the host's decode of the image. */
    static final String[] CHECKED = {"start_kernel", "do_sys_openat2", "native_safe_halt", "x86_64_start_kernel"};

    @Test
    void bootsToInitAndPowersOff(@TempDir Path tmp) throws Exception {
        // the default workload, plus a few /proc/kallsyms lines for the symbol check
        String grep = "/bin/busybox grep -E ' (" + String.join("|", CHECKED) + ")$' /proc/kallsyms\n";
        String init = Initramfs.defaultInitScript().replace("sync\n", grep + "sync\n");
        byte[] busybox = Files.readAllBytes(images.busybox(Arch.X86_64));
        Path initrd = tmp.resolve("initramfs.cpio");
        Files.write(initrd, Initramfs.defaultGuest(busybox).file("init", 0755, init).toBytes());

        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(Arch.X86_64, kernel, initrd, null, 256, 30,
                console, new PrintStream(new ByteArrayOutputStream())));
        String log = console.toString(StandardCharsets.ISO_8859_1);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + String.join("\n", r.lastLines()));
        assertTrue(log.contains("Linux version 6."), "kernel banner");
        assertTrue(log.contains(Initramfs.MARK_DONE), "init marker");
        assertTrue(log.contains("reboot: Power down"), "ACPI S5 power-off");
        assertTrue(r.initDoneGuestNanos() > 0);
        // init_task's stack page was taken out of Unicorn's store slow path (X86LinuxGuest.keepInitStackWritable)
        Matcher marked = Pattern.compile("initStackPagesMarked=(\\d+)").matcher(r.stats());
        assertTrue(marked.find() && Long.parseLong(marked.group(1)) > 0, r.stats());
        // and the pages of clear_bss's rep stosb over .bss and .brk (X86LinuxGuest.keepBssClearWritable):
        // 17 MiB in Debian's 6.1, some 4,400 pages, each marked after a few dozen of its 4,096 stores
        Matcher bss = Pattern.compile("bssPagesMarked=(\\d+)").matcher(r.stats());
        assertTrue(bss.find() && Long.parseLong(bss.group(1)) > 1000, r.stats());

        // timer interrupts arrive (the PIT on the 8259's IRQ 0), the serial console uses IRQ 4
        Matcher timer = Pattern.compile("\\n\\s*0:\\s+(\\d+)\\s+XT-PIC\\s+timer").matcher(log);
        assertTrue(timer.find(), "IRQ 0 line in /proc/interrupts");
        assertTrue(Integer.parseInt(timer.group(1)) > 100, "timer interrupts: " + timer.group(1));
        assertTrue(Pattern.compile("\\n\\s*4:\\s+[1-9]\\d*\\s+XT-PIC\\s+ttyS0").matcher(log).find(), "ttyS0 interrupts");

        // sleep 1 takes one second of guest time (uptime in centiseconds)
        Matcher sleep = Pattern.compile(Initramfs.MARK_SLEEP + " .*elapsed_cs=(\\d+)").matcher(log);
        assertTrue(sleep.find(), "sleep marker");
        int cs = Integer.parseInt(sleep.group(1));
        assertTrue(cs >= 99 && cs <= 103, "sleep 1 took " + cs + " cs of guest time");

        // kallsyms decoded from the image agree with the guest's /proc/kallsyms
        SymbolTable symbols = Kallsyms.fromElf(X86LinuxLoader.readKernel(kernel).vmlinux());
        int checked = 0;
        for (String name : CHECKED) {
            Matcher m = Pattern.compile("\\n([0-9a-f]{16}) [tT] " + name + "\\r?\\n").matcher(log);
            if (!m.find()) continue;
            assertEquals(symbols.address(name), Long.parseUnsignedLong(m.group(1), 16), name);
            checked++;
        }
        assertEquals(CHECKED.length, checked, "all checked symbols printed by the guest");
    }

    @Test
    void sameRunTwiceIsIdentical() throws Exception {
        Path initrd = images.initramfs(Arch.X86_64);
        long[][] t = new long[2][];
        String[] console = new String[2];
        for (int i = 0; i < 2; i++) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            BootRunner.Result r = BootRunner.boot(new BootRunner.Options(Arch.X86_64, kernel, initrd, null, 256, 30, out, null));
            assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status());
            t[i] = new long[] {r.initDoneGuestNanos(), r.instructions(), r.guestNanos()};
            console[i] = out.toString(java.nio.charset.StandardCharsets.ISO_8859_1);
        }
        // rdtsc reads the virtual clock (the kernel's entropy included): the runs are identical
        assertEquals(java.util.Arrays.toString(t[0]), java.util.Arrays.toString(t[1]), "init marker, instructions, guest time");
        assertEquals(console[0], console[1], "console");
    }
}
