package dev.kpemu.boot;

import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.x86.X86Pc;
import dev.kpemu.unicorn.X86Reg;

/**
 * Boots a Linux kernel on kpemu and maps the outcome to the CLI's exit codes:
 * {@value #EXIT_POWERED_OFF} the guest powered off, {@value #EXIT_GUEST_FAILED} guest panic or
 * unhandled fault (with the kernel's last lines and the PC/symbol), {@value #EXIT_TIMEOUT} the
 * guest-time limit passed. The timeout is in guest seconds (virtual time, so a given run always
 * stops at the same point).
 */
public final class BootRunner {
    public static final int EXIT_POWERED_OFF = 0, EXIT_ERROR = 1, EXIT_GUEST_FAILED = 3, EXIT_TIMEOUT = 4;
    /** The default x86-64 command line (see docs/x86-boot-notes.md for each option). */
    public static final String X86_DEFAULT_APPEND = "console=ttyS0 nokaslr";

    public record Options(Arch arch, Path kernel, Path initrd, String append, int memoryMiB, double timeoutSeconds,
                          OutputStream console, PrintStream trace) {
        public Options {
            if (memoryMiB < 64) throw new IllegalArgumentException("--memory must be at least 64 MiB");
            if (timeoutSeconds <= 0) throw new IllegalArgumentException("--timeout must be positive");
        }

        public static Options defaults(Arch arch) {
            return new Options(arch, null, null, null, 256, 60, System.err, System.out);
        }
    }

    public record Result(int exitCode, String status, StopReason stop, long guestNanos, long instructions,
                         long hostNanos, long initDoneGuestNanos, long initDoneHostNanos, long interrupts,
                         List<String> lastLines, long pc, String symbol, String stats) {}

    private BootRunner() {}

    public static Result boot(Options o) throws KernelImageException {
        if (o.arch() != Arch.X86_64) throw new IllegalArgumentException("BootRunner: only x86_64 is wired here");
        Path kernel = o.kernel(), initrd = o.initrd();
        if (kernel == null || initrd == null) {
            GuestImages g = GuestImages.forRepository();
            if (kernel == null) kernel = g.kernel(o.arch());
            if (initrd == null) initrd = g.initramfs(o.arch());
        }
        long hostStart = System.nanoTime();
        X86LinuxLoader.KernelFile kf = X86LinuxLoader.readKernel(kernel, kernelCacheDir());
        byte[] initrdBytes;
        try {
            initrdBytes = Files.readAllBytes(initrd);
        } catch (java.io.IOException e) {
            throw new KernelImageException("cannot read initrd " + initrd + ": " + e.getMessage(), e);
        }
        String append = o.append() == null ? X86_DEFAULT_APPEND : o.append();
        long ram = (long) o.memoryMiB() << 20;
        ConsoleMonitor[] mon = new ConsoleMonitor[1];
        X86Pc[] pcRef = new X86Pc[1];
        mon[0] = new ConsoleMonitor(o.console(), 40, List.of(Initramfs.MARK_START, Initramfs.MARK_DONE, "Run /init"),
                () -> pcRef[0] == null ? 0 : pcRef[0].machine().clock().nanos());
        try (X86Pc pc = new X86Pc(ram, mon[0], false)) {
            pcRef[0] = pc;
            var m = pc.machine();
            m.setSliceInstructions(Long.getLong("kpemu.slice", Machine.DEFAULT_SLICE));
            X86LinuxLoader.Loaded loaded = X86LinuxLoader.load(m, kf, initrdBytes, append, ram, pc.rsdp());
            if (o.trace() != null) {
                o.trace().printf("kpemu: guest starts %.2f s after boot() (image, symbols, machine)%n", (System.nanoTime() - hostStart) / 1e9);
                o.trace().printf("kpemu: x86_64 %s, boot protocol %x, entry 0x%x, initrd 0x%x+0x%x, %d MiB, cmdline \"%s\"%n",
                        kf.bzImage() != null ? "bzImage" : "vmlinux", loaded.protocolVersion(), loaded.entry(),
                        loaded.initrdBase(), loaded.initrdSize(), o.memoryMiB(), append);
            }
            long limitNanos = (long) (o.timeoutSeconds() * 1e9);
            long chunk = 20_000_000;
            StopReason stop;
            int exit;
            String status;
            while (true) {
                stop = m.run(chunk);
                if (mon[0].panicked()) {
                    exit = EXIT_GUEST_FAILED;
                    status = "guest kernel panic";
                    break;
                }
                if (stop instanceof StopReason.BudgetExhausted) {
                    if (m.clock().nanos() >= limitNanos) {
                        exit = EXIT_TIMEOUT;
                        status = String.format("timeout after %.3f guest seconds", m.clock().nanos() / 1e9);
                        break;
                    }
                    continue;
                }
                if (stop instanceof StopReason.PoweredOff) {
                    exit = EXIT_POWERED_OFF;
                    status = "guest powered off";
                } else if (stop instanceof StopReason.Reset) {
                    exit = EXIT_POWERED_OFF;
                    status = "guest reset";
                } else if (stop instanceof StopReason.Halted h) {
                    exit = EXIT_GUEST_FAILED;
                    status = "guest halted with interrupts off";
                } else if (stop instanceof StopReason.GuestError e) {
                    exit = EXIT_GUEST_FAILED;
                    status = "guest fault: " + e.message();
                } else {
                    exit = EXIT_GUEST_FAILED;
                    status = "stopped: " + stop;
                }
                break;
            }
            long rip = m.pc();
            String sym;
            try {
                sym = Kallsyms.fromElf(kf.vmlinux()).format(rip);
            } catch (KernelImageException e) {
                sym = "?";
            }
            Result r = new Result(exit, status, stop, m.clock().nanos(), m.clock().instructions(), System.nanoTime() - hostStart,
                    mon[0].seenAt(Initramfs.MARK_DONE), mon[0].seenAtHost(Initramfs.MARK_DONE) < 0 ? -1 : mon[0].seenAtHost(Initramfs.MARK_DONE) - hostStart,
                    m.externalInterrupts(), mon[0].lastLines(), rip, sym,
                    "exceptions=" + m.exceptionsDelivered() + " uartBytes=" + pc.uart().transmitted());
            try { mon[0].flush(); } catch (java.io.IOException ignored) { }
            return r;
        }
    }

    /** -Dkpemu.kernelCache, else {@code <kpemu cache>/kernels} when a cache is configured (-Dkpemu.cache or $KPEMU_CACHE), else null. */
    static Path kernelCacheDir() {
        String k = System.getProperty("kpemu.kernelCache");
        if (k != null && !k.isBlank()) return Path.of(k);
        String c = System.getProperty("kpemu.cache");
        if (c == null || c.isBlank()) c = System.getenv("KPEMU_CACHE");
        return c == null || c.isBlank() ? null : Path.of(c).resolve("kernels");
    }

    /** For experiments: {@code BootRunner [--kernel F] [--initrd F] [--append S] [--memory MiB] [--timeout S]}. */
    public static void main(String[] args) throws Exception {
        Path kernel = null, initrd = null;
        String append = null;
        int mem = 256;
        double timeout = 60;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--kernel" -> kernel = Path.of(args[++i]);
                case "--initrd" -> initrd = Path.of(args[++i]);
                case "--append" -> append = args[++i];
                case "--memory" -> mem = Integer.parseInt(args[++i]);
                case "--timeout" -> timeout = Double.parseDouble(args[++i]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        Result r = boot(new Options(Arch.X86_64, kernel, initrd, append, mem, timeout, System.err, System.out));
        System.out.printf("kpemu: stats %s%n", r.stats());
        System.out.printf("kpemu: %s (exit %d) at pc 0x%x %s; guest %.3f s, %d instructions, %d interrupts, host %.2f s; init done at guest %.3f s host %.2f s%n",
                r.status(), r.exitCode(), r.pc(), r.symbol(), r.guestNanos() / 1e9, r.instructions(), r.interrupts(),
                r.hostNanos() / 1e9, r.initDoneGuestNanos() / 1e9, r.initDoneHostNanos() / 1e9);
        if (r.exitCode() == EXIT_GUEST_FAILED) {
            System.out.println("kpemu: last console lines:");
            for (String l : r.lastLines()) System.out.println("  " + l);
        }
        System.exit(r.exitCode());
    }
}
