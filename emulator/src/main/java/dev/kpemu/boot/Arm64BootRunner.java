package dev.kpemu.boot;

import static dev.kpemu.boot.BootRunner.EXIT_GUEST_FAILED;
import static dev.kpemu.boot.BootRunner.EXIT_POWERED_OFF;
import static dev.kpemu.boot.BootRunner.EXIT_TIMEOUT;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.arm64.Arm64Machine;

/**
 * {@link BootRunner} for arm64: boots a Linux {@code Image} on {@link Arm64Board} with the
 * arm64 boot protocol ({@link Arm64LinuxLoader}) and maps the outcome to the shared exit codes:
 * powered off (PSCI SYSTEM_OFF) or reset → 0; kernel panic, unhandled guest fault or a WFI
 * nothing can wake → 3 (with the kernel's last lines and the PC/symbol); guest-time timeout →
 * 4. After a panic line the guest runs on (up to {@link #PANIC_GRACE_INSTRUCTIONS}) until the
 * kernel's {@code ---[ end Kernel panic} line, so the report carries the whole oops.
 */
public final class Arm64BootRunner {
    /** Console lines kept for the report. */
    public static final int KEEP_LINES = 40;
    public static final String PANIC_END = "---[ end Kernel panic";
    /** Instructions the guest may run after a panic line before the runner stops it (the stack dump). */
    static final long PANIC_GRACE_INSTRUCTIONS = 200_000_000L;
    static final long CHUNK = 20_000_000L;

    private Arm64BootRunner() {}

    public static BootRunner.Result boot(BootRunner.Options o) throws KernelImageException {
        if (o.arch() != Arch.ARM64) throw new IllegalArgumentException("Arm64BootRunner boots arm64 guests, not " + o.arch());
        if (!Machine.canWatchInterruptEnable()) {
            throw new IllegalStateException("the native instruction clock (libkpemu_clock.so) predates the interrupt-enable watch "
                    + "that Linux's idle loop needs; rebuild it with scripts/fetch-natives.sh (the ./kpemu launcher does this)");
        }
        Path kernel = o.kernel(), initrd = o.initrd();
        if (kernel == null || initrd == null) {
            GuestImages g = GuestImages.forRepository();
            if (kernel == null) kernel = g.kernel(Arch.ARM64);
            if (initrd == null) initrd = g.initramfs(Arch.ARM64);
        }
        long hostStart = System.nanoTime();
        byte[] kernelBytes = read(kernel, "kernel");
        byte[] initrdBytes = read(initrd, "initrd");
        String kernelName = kernel.toString();
        byte[] image = Arm64LinuxLoader.rawImage(kernelBytes, kernelName);
        // Symbols serve only the final report: decode them beside the boot instead of before it.
        CompletableFuture<SymbolTable> symbols = CompletableFuture.supplyAsync(() -> {
            try {
                return Kallsyms.fromArm64Image(image, kernelName);
            } catch (KernelImageException e) {
                throw new CompletionException(e);
            }
        });
        String append = o.append() == null ? Arm64LinuxLoader.DEFAULT_CMDLINE : o.append();
        long ram = (long) o.memoryMiB() << 20;
        Arm64Machine[] machine = new Arm64Machine[1];
        ConsoleMonitor con = new ConsoleMonitor(o.console(), KEEP_LINES,
                List.of(Initramfs.MARK_START, Initramfs.MARK_DONE, "Run /init", PANIC_END),
                () -> machine[0] == null ? 0 : machine[0].clock().liveNanos());
        try (Arm64Board board = Arm64Board.create(ram, b -> {
            try {
                con.write(b);
                if (b == '\n') con.flush();
            } catch (IOException e) {
                // the console sink went away; the guest goes on
            }
        })) {
            Arm64Machine m = board.machine();
            machine[0] = m;
            m.setSliceInstructions(Long.getLong("kpemu.slice", Machine.DEFAULT_SLICE));
            Arm64LinuxLoader.Loaded l = Arm64LinuxLoader.load(m, image, kernelName, initrdBytes, append);
            if (o.trace() != null) {
                o.trace().printf("kpemu: guest starts %.2f s after boot() (image, machine)%n", (System.nanoTime() - hostStart) / 1e9);
                o.trace().printf("kpemu: arm64 Image at 0x%x (image_size 0x%x), device tree at 0x%x (%d bytes), initrd %s, %d MiB, cmdline \"%s\"%n",
                        l.kernelBase(), l.header().effectiveSize(), l.dtbAddress(), l.dtbSize(),
                        l.initrd() == null ? "none" : String.format("0x%x-0x%x", l.initrd().start(), l.initrd().end()), o.memoryMiB(), append);
            }
            long limitNanos = (long) (o.timeoutSeconds() * 1e9);
            StopReason stop;
            int exit;
            String status;
            long panicAt = -1;
            while (true) {
                stop = m.run(CHUNK);
                if (con.panicked()) {
                    if (panicAt < 0) panicAt = m.clock().instructions();
                    if (con.seen(PANIC_END) || m.clock().instructions() - panicAt >= PANIC_GRACE_INSTRUCTIONS
                            || !(stop instanceof StopReason.BudgetExhausted)) {
                        exit = EXIT_GUEST_FAILED;
                        status = "guest kernel panic: " + panicLine(con.lastLines());
                        break;
                    }
                    continue;
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
                } else if (stop instanceof StopReason.Halted) {
                    exit = EXIT_GUEST_FAILED;
                    status = "guest halted: WFI with no interrupt or timer that could wake it";
                } else if (stop instanceof StopReason.GuestError e) {
                    exit = EXIT_GUEST_FAILED;
                    status = "guest fault: " + e.message();
                } else {
                    exit = EXIT_GUEST_FAILED;
                    status = "stopped: " + stop;
                }
                break;
            }
            long pc = m.pc();
            try {
                con.flush();
            } catch (IOException ignored) {
                // nothing to do
            }
            long doneHost = con.seenAtHost(Initramfs.MARK_DONE);
            String stats = String.format("irqs=%d exceptions=%d gicAcks=%d watchStops=%d sysregInsns=%d sysregJava=%d timerAccesses=%d uartBytes=%d",
                    m.irqsTaken(), m.exceptionsTaken(), board.gic().acknowledged(), m.interruptWatchStops(),
                    board.timer().sysRegInstructions(), board.timer().javaHookCalls(), board.timer().accesses(), board.uart().transmitted());
            return new BootRunner.Result(exit, status, stop, m.clock().nanos(), m.clock().instructions(), System.nanoTime() - hostStart,
                    con.seenAt(Initramfs.MARK_DONE), doneHost < 0 ? -1 : doneHost - hostStart, m.irqsTaken(), con.lastLines(),
                    pc, symbolize(symbols, pc), stats);
        }
    }

    private static String panicLine(List<String> lines) {
        for (String l : lines) {
            int i = l.indexOf(ConsoleMonitor.PANIC);
            if (i >= 0) return l.substring(i);
        }
        return ConsoleMonitor.PANIC;
    }

    private static String symbolize(CompletableFuture<SymbolTable> symbols, long pc) {
        try {
            return symbols.join().format(pc);
        } catch (RuntimeException e) {
            return "(no symbols: " + e.getMessage() + ")";
        }
    }

    private static byte[] read(Path p, String what) throws KernelImageException {
        try {
            return Files.readAllBytes(p);
        } catch (IOException e) {
            throw new KernelImageException("cannot read " + what + " " + p + ": " + e.getMessage(), e);
        }
    }
}
