package dev.kpemu.boot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
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
import dev.kpemu.machine.StopReason;

/** Debian's unmodified arm64 kernel booted to the initramfs workload and power-off. */
@Tag("kernel")
class Arm64BootKernelTest {
    static final String[] KALLSYMS_CHECKED = {"do_sys_openat2", "start_kernel", "kernel_init", "gic_handle_irq", "arch_timer_handler_virt"};
    static GuestImages images;
    static Path kernel, busybox;

    @BeforeAll
    static void fetch() throws Exception {
        images = GuestImages.forRepository();
        kernel = images.kernel(Arch.ARM64);
        busybox = images.busybox(Arch.ARM64);
    }

    /** The default guest with /init also printing a few /proc/kallsyms lines before the marker. */
    static byte[] initramfsWithKallsyms() throws Exception {
        StringBuilder pattern = new StringBuilder();
        for (String s : KALLSYMS_CHECKED) pattern.append(pattern.isEmpty() ? "" : "|").append(s);
        String init = Initramfs.defaultInitScript().replace("echo \"" + Initramfs.MARK_DONE + "\"",
                "/bin/busybox grep -E ' (" + pattern + ")$' /proc/kallsyms | while read a t n; do echo \"KALLSYMS $a $t $n\"; done\n"
                        + "echo \"" + Initramfs.MARK_DONE + "\"");
        Initramfs r = new Initramfs()
                .dir("bin", 0755).dir("dev", 0755).dir("proc", 0555).dir("sys", 0555).dir("tmp", 01777).dir("root", 0700)
                .charDevice("dev/console", 0600, 5, 1)
                .file("bin/busybox", 0755, Files.readAllBytes(busybox));
        for (String a : Initramfs.APPLETS) r.symlink("bin/" + a, "busybox");
        r.file("init", 0755, init);
        return r.toBytes();
    }

    @Test
    void bootsToTheWorkloadAndPowersOff(@TempDir Path tmp) throws Exception {
        Path initrd = tmp.resolve("initramfs.cpio");
        Files.write(initrd, initramfsWithKallsyms());
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(Arch.ARM64, kernel, initrd, null, 256, 30, console, null));
        String out = console.toString(StandardCharsets.ISO_8859_1);
        String diag = r.status() + " at " + r.symbol() + "\n" + String.join("\n", r.lastLines());
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), diag);
        assertTrue(r.stop() instanceof StopReason.PoweredOff, diag);
        assertTrue(out.contains("Run /init as init process"), diag);
        assertTrue(out.contains(Initramfs.MARK_START), diag);
        assertTrue(out.contains(Initramfs.MARK_DONE), diag);
        assertTrue(out.contains("hello from kpemu"), diag);
        assertTrue(r.initDoneGuestNanos() > 0);

        // Timer interrupts arrived through the GIC: "11:   NNN   GIC-0  27 Level   arch_timer".
        Matcher timer = Pattern.compile("(?m)^\\s*\\d+:\\s+(\\d+)\\s+GIC-0\\s+27 Level\\s+arch_timer").matcher(out);
        assertTrue(timer.find(), "arch_timer line in /proc/interrupts\n" + out);
        assertTrue(Long.parseLong(timer.group(1)) > 10, "timer interrupts: " + timer.group(1));
        assertTrue(r.interrupts() > 10);

        // `sleep 1` took one second of guest time (uptime in centiseconds), and idled rather than spun.
        Matcher sleep = Pattern.compile(Initramfs.MARK_SLEEP + " .*elapsed_cs=(\\d+)").matcher(out);
        assertTrue(sleep.find(), out);
        int cs = Integer.parseInt(sleep.group(1));
        assertTrue(cs >= 99 && cs <= 110, "sleep 1 took " + cs + " cs of guest uptime");
        assertTrue(r.guestNanos() - r.initDoneGuestNanos() >= 1_000_000_000L, "guest time covers the sleep");
        assertTrue(r.instructions() < 2_000_000_000L, "the sleep idled: " + r.instructions() + " instructions");

        // kallsyms decoded from the image agree with the booted kernel's /proc/kallsyms (nokaslr).
        SymbolTable syms = Kallsyms.fromArm64Image(Files.readAllBytes(kernel), kernel.toString());
        Matcher k = Pattern.compile("KALLSYMS ([0-9a-f]{16}) (\\w) (\\w+)").matcher(out);
        java.util.Set<String> names = new java.util.HashSet<>();
        while (k.find()) {
            long guestAddr = Long.parseUnsignedLong(k.group(1), 16);
            String name = k.group(3);
            assertTrue(guestAddr != 0, "/proc/kallsyms shows real addresses to root");
            // Static functions may share a name (gic_handle_irq: GICv2 and GICv3): match name and address.
            var match = syms.allByName(name).stream().filter(s -> s.address() == guestAddr).findFirst();
            assertTrue(match.isPresent(), name + " at " + k.group(1) + " not among " + syms.allByName(name));
            assertEquals(Character.toLowerCase(k.group(2).charAt(0)), Character.toLowerCase(match.get().type()), name + " type");
            names.add(name);
        }
        assertEquals(java.util.Set.of(KALLSYMS_CHECKED), names, "kallsyms lines\n" + out);
    }

    @Test
    void panicIsExitThreeWithTheKernelsLastLines() throws Exception {
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(Arch.ARM64, kernel, images.initramfs(Arch.ARM64),
                dev.kpemu.boot.Arm64LinuxLoader.DEFAULT_CMDLINE + " rdinit=/no/such/rdinit init=/no/such/init", 256, 30, console, null));
        String diag = r.status() + " at " + r.symbol() + "\n" + String.join("\n", r.lastLines());
        assertEquals(BootOutcome.GUEST_FAILED, r.outcome(), diag);
        assertTrue(r.status().startsWith("guest kernel panic: Kernel panic - not syncing"), diag);
        assertTrue(r.lastLines().stream().anyMatch(l -> l.contains(BootRunner.PANIC_END)), "the whole oops is kept\n" + diag);
        assertTrue(r.symbol().matches("\\w[\\w.]*\\+0x[0-9a-f]+/0x[0-9a-f]+"), "PC symbolized: " + r.symbol());
    }

    @Test
    void timeoutIsExitFour() throws Exception {
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(Arch.ARM64, kernel, images.initramfs(Arch.ARM64),
                null, 256, 0.05, new ByteArrayOutputStream(), null));
        assertEquals(BootOutcome.TIMEOUT, r.outcome(), r.status());
        assertTrue(r.guestNanos() >= 50_000_000L && r.guestNanos() < 80_000_000L, "stopped near 50 ms of guest time: " + r.guestNanos());
    }
}
