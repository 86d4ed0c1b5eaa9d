package dev.kpemu.boot;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.arm64.Arm64Machine;

/**
 * Boots an arm64 Linux kernel on {@link Arm64Board} and maps the outcome to the CLI's exit
 * codes: {@value #EXIT_POWERED_OFF} the guest powered off (PSCI SYSTEM_OFF) or reset,
 * {@value #EXIT_GUEST_FAILED} a kernel panic, an unhandled guest fault or a halt nothing can
 * wake (with the kernel's last lines and the PC/symbol), {@value #EXIT_TIMEOUT} the timeout
 * passed. The timeout is in guest seconds (virtual time: a given run always stops at the same
 * point, whatever the host's load).
 */
public final class Arm64BootRunner {
    public static final int EXIT_POWERED_OFF = 0, EXIT_ERROR = 1, EXIT_GUEST_FAILED = 3, EXIT_TIMEOUT = 4;
    public static final int DEFAULT_MEMORY_MIB = 512;
    /** Console lines kept for the report. */
    public static final int KEEP_LINES = 40;
    public static final String PANIC = "Kernel panic - not syncing", PANIC_END = "---[ end Kernel panic";
    /** Instructions the guest may run after a panic line before the runner stops it (the stack dump). */
    static final long PANIC_GRACE_INSTRUCTIONS = 200_000_000L;

    public record Options(Path kernel, Path initrd, String append, int memoryMiB, double timeoutSeconds,
                          OutputStream console, PrintStream trace) {
        public Options {
            if (memoryMiB < 64) throw new IllegalArgumentException("--memory must be at least 64 MiB");
            if (timeoutSeconds <= 0) throw new IllegalArgumentException("--timeout must be positive");
        }

        public static Options defaults() {
            return new Options(null, null, null, DEFAULT_MEMORY_MIB, 60, System.err, System.out);
        }
    }

    /**
     * The outcome. Times are guest nanoseconds and host nanoseconds since the runner started;
     * the init marker ({@link Initramfs#MARK_DONE}) times are -1 when it never appeared.
     */
    public record Result(int exitCode, String status, StopReason stop, long guestNanos, long instructions,
                         long hostNanos, long initDoneGuestNanos, long initDoneHostNanos, long interrupts,
                         List<String> lastLines, long pc, String symbol) {}

    private Arm64BootRunner() {}

    public static Result boot(Options o) throws KernelImageException {
        if (!dev.kpemu.machine.Machine.canWatchInterruptEnable()) {
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
        byte[] image = Arm64LinuxLoader.rawImage(kernelBytes, kernel.toString());
        // Symbols serve only the final report: decode them beside the boot instead of before it.
        String kernelName = kernel.toString();
        java.util.concurrent.CompletableFuture<SymbolTable> symbols = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            try {
                return Kallsyms.fromArm64Image(image, kernelName);
            } catch (KernelImageException e) {
                throw new java.util.concurrent.CompletionException(e);
            }
        });
        String append = o.append() == null ? Arm64LinuxLoader.DEFAULT_CMDLINE : o.append();
        long ram = (long) o.memoryMiB() << 20;
        Console con = new Console(o.console(), hostStart);
        try (Arm64Board board = Arm64Board.create(ram, con::put)) {
            Arm64Machine m = board.machine();
            con.machine = m;
            Arm64LinuxLoader.Loaded l = Arm64LinuxLoader.load(m, image, kernel.toString(), initrdBytes, append);
            if (o.trace() != null) {
                o.trace().printf("kpemu: arm64 Image at 0x%x (image_size 0x%x), device tree at 0x%x (%d bytes), initrd %s, %d MiB, cmdline \"%s\"%n",
                        l.kernelBase(), l.header().effectiveSize(), l.dtbAddress(), l.dtbSize(),
                        l.initrd() == null ? "none" : String.format("0x%x-0x%x", l.initrd().start(), l.initrd().end()), o.memoryMiB(), append);
            }
            long limitNanos = (long) (o.timeoutSeconds() * 1e9);
            long chunk = 20_000_000;
            StopReason stop;
            int exit;
            String status;
            long panicAt = -1;
            while (true) {
                stop = m.run(chunk);
                if (con.panicked && panicAt < 0) panicAt = m.clock().instructions();
                if (con.panicked && (con.panicEnded || stop instanceof StopReason.HostRequest
                        || m.clock().instructions() - panicAt >= PANIC_GRACE_INSTRUCTIONS || !(stop instanceof StopReason.BudgetExhausted))) {
                    exit = EXIT_GUEST_FAILED;
                    status = "guest kernel panic: " + con.panicLine;
                    break;
                }
                if (stop instanceof StopReason.BudgetExhausted || stop instanceof StopReason.HostRequest) {
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
            con.flush();
            return new Result(exit, status, stop, m.clock().nanos(), m.clock().instructions(), System.nanoTime() - hostStart,
                    con.initDoneGuest, con.initDoneHost, m.irqsTaken(), con.lastLines(), pc, symbolize(symbols, pc));
        }
    }

    private static String symbolize(java.util.concurrent.CompletableFuture<SymbolTable> symbols, long pc) {
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

    /** The console sink: passes bytes on, keeps the last lines, notices the marker and a panic. */
    private static final class Console {
        private final OutputStream out;
        private final long hostStart;
        private final Deque<String> tail = new ArrayDeque<>();
        private final StringBuilder line = new StringBuilder();
        Arm64Machine machine;
        boolean panicked, panicEnded;
        String panicLine;
        long initDoneGuest = -1, initDoneHost = -1;

        Console(OutputStream out, long hostStart) {
            this.out = out;
            this.hostStart = hostStart;
        }

        /** Called from the PL011's MMIO callback: must not stop the engine itself. */
        void put(int b) {
            try {
                if (out != null) {
                    out.write(b);
                    if (b == '\n') out.flush();
                }
            } catch (IOException e) {
                // the console sink went away; the guest goes on
            }
            if (b == '\n') endLine();
            else if (b != '\r') line.append((char) (b & 0xff));
        }

        private void endLine() {
            String l = line.toString();
            line.setLength(0);
            tail.addLast(l);
            while (tail.size() > KEEP_LINES) tail.removeFirst();
            if (initDoneGuest < 0 && l.contains(Initramfs.MARK_DONE)) {
                initDoneGuest = machine.clock().liveNanos();
                initDoneHost = System.nanoTime() - hostStart;
            }
            if (!panicked && l.contains(PANIC)) {
                panicked = true;
                panicLine = l.substring(l.indexOf(PANIC));
            }
            if (panicked && l.contains(PANIC_END)) {
                panicEnded = true;
                machine.requestStopAtSliceEnd(new StopReason.HostRequest("kernel panic"));
                machine.endSliceSoon();
            }
        }

        void flush() {
            try {
                if (out != null) out.flush();
            } catch (IOException ignored) {
                // nothing to do
            }
        }

        List<String> lastLines() {
            List<String> r = new ArrayList<>(tail);
            if (!line.isEmpty()) r.add(line.toString());
            return r;
        }
    }

    /** For experiments: {@code Arm64BootRunner [--kernel F] [--initrd F] [--append S] [--memory MiB] [--timeout S]}. */
    public static void main(String[] args) throws Exception {
        Path kernel = null, initrd = null;
        String append = null;
        int mem = DEFAULT_MEMORY_MIB;
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
        Result r = boot(new Options(kernel, initrd, append, mem, timeout, System.err, System.out));
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
