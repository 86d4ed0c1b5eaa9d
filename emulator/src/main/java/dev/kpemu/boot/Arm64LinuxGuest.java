package dev.kpemu.boot;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelFiles;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.image.btf.BtfLocator;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.Schedule;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.machine.board.Arm64Board;

/**
 * An arm64 Linux guest on kpemu's board ({@link Arm64Board}), loaded by the arm64 boot protocol:
 * a board of {@code Options.cpus()} PEs (Linux starts the others through PSCI CPU_ON), run on the
 * schedule {@code Options.schedSeed()} names ({@link Schedule#of}); with one CPU the machine is the
 * one kpemu always booted.
 */
final class Arm64LinuxGuest implements LinuxGuest {
    private final Arm64Board board;
    private final ConsoleMonitor console;
    private final Arm64LinuxLoader.Loaded loaded;
    /** The raw Image: Debian's file itself, read whole only when probes ask for it. */
    private final dev.kpemu.image.OnDemandFileBytes image;
    private final String name;
    private final CompletableFuture<SymbolTable> symbols;
    private final HostArea hostArea;
    private final int memoryMiB;
    /** The kernel file as given: what the text tables' cache is keyed by. */
    private final Path kernelPath;

    private Arm64LinuxGuest(Arm64Board board, ConsoleMonitor console, Arm64LinuxLoader.Loaded loaded, dev.kpemu.image.OnDemandFileBytes image, String name,
                            CompletableFuture<SymbolTable> symbols, HostArea hostArea, int memoryMiB, Path kernelPath) {
        this.board = board;
        this.image = image;
        this.name = name;
        this.console = console;
        this.loaded = loaded;
        this.symbols = symbols;
        this.hostArea = hostArea;
        this.memoryMiB = memoryMiB;
        this.kernelPath = kernelPath;
    }

    /** {@code fromSnapshot}: a snapshot's RAM follows, so the kernel and initrd are not written into RAM. */
    static Arm64LinuxGuest prepare(BootRunner.Options o, Path kernelPath, byte[] initrd, boolean fromSnapshot) throws KernelImageException {
        if (!Machine.canWatchInterruptEnable()) {
            throw new IllegalStateException("the native instruction clock (libkpemu_clock.so) predates the interrupt-enable watch "
                    + "that Linux's idle loop needs; rebuild it with scripts/fetch-natives.sh (the ./kpemu launcher does this)");
        }
        String name = kernelPath.toString();
        if (!java.nio.file.Files.isRegularFile(kernelPath)) BootRunner.read(kernelPath, "kernel");   // its one-line error
        dev.kpemu.image.OnDemandFileBytes image = KernelFiles.arm64Image(kernelPath);
        // Decode the symbols beside the boot: nothing needs them before the guest runs.
        CompletableFuture<SymbolTable> symbols = CompletableFuture.supplyAsync(() -> {
            try {
                return BootRunner.symbols(kernelPath, linkBase -> Kallsyms.arm64FileOffsets(linkBase, image.length()),
                        () -> Kallsyms.fromArm64Image(image.bytes(), name));
            } catch (KernelImageException e) {
                throw new CompletionException(e);
            }
        });
        String append = o.append() == null ? Arm64LinuxLoader.DEFAULT_CMDLINE : o.append();
        long ram = (long) o.memoryMiB() << 20;
        Arm64Machine[] ref = new Arm64Machine[1];
        ConsoleMonitor con = BootRunner.consoleMonitor(o, () -> ref[0] == null ? 0 : ref[0].clock().liveNanos());
        Arm64Board board = Arm64Board.create(ram, b -> {
            try {
                con.write(b);
                if (b == '\n') con.flush();
            } catch (IOException e) {
                // the console sink went away; the guest goes on
            }
        }, o.terminal() == null ? null : b -> {
            try {
                o.terminal().output().write(b);
                if (b == '\n') o.terminal().output().flush();
            } catch (IOException e) {
                // the terminal's sink went away; the guest goes on
            }
        }, o.cpus());
        ref[0] = board.machine();
        board.machine().setSchedule(Schedule.of(o.schedSeed()));     // no effect with one vCPU
        try {
            long guestRam = ram - HOST_AREA_BYTES;
            Arm64LinuxLoader.Loaded l = Arm64LinuxLoader.load(board.machine(), image, name, initrd, append, guestRam, o.terminal() != null, !fromSnapshot);
            long hostBase = board.machine().memory().region(dev.kpemu.machine.arm64.Arm64Layout.RAM_REGION).base() + guestRam;
            Arm64LinuxGuest g = new Arm64LinuxGuest(board, con, l, image, name, symbols, new HostArea(hostBase, HOST_AREA_BYTES), o.memoryMiB(), kernelPath);
            if (!fromSnapshot) g.debugRegisterWrites = g.watchDebugRegisterWrites();
            if (o.cpus() > 1) g.spinWaitSites = g.yieldAtSpinWaits();
            return g;
        } catch (KernelImageException | RuntimeException e) {
            board.close();
            throw e;
        }
    }

    /** The host breakpoints after the kernel's writes of a watchpoint register ({@link Arm64DebugRegisterWrites}); -1: not set. */
    private int debugRegisterWrites = -1;

    /**
     * Host breakpoints after every {@code msr} of DBGWVRn/DBGWCRn/MDSCR_EL1 in the kernel's text
     * as loaded in RAM ({@code _stext}'s offset in the Image); none (-1) when kallsyms lacks
     * {@code _stext} or {@code _etext}. Not for a restored snapshot (its RAM comes later).
     */
    private int watchDebugRegisterWrites() {
        SymbolTable syms = symbols();
        var start = syms.byName("_stext");
        var end = syms.byName("_etext");
        if (start.isEmpty() || end.isEmpty()) return -1;
        var offset = syms.fileOffset(start.get().address());      // in the Image, loaded at kernelBase
        if (offset.isEmpty()) return -1;
        long textVa = start.get().address(), textPa = loaded.kernelBase() + offset.getAsLong(), length = end.get().address() - textVa;
        // the text as loaded is the Image's (nothing rewrites it before the guest runs): kept by the Image's digest
        List<Long> sites = BootRunner.keptSites(String.format("arm64 watch-register writes, text %#x at %#x, %#x bytes", textVa, textPa, length),
                kernelPath, () -> Arm64DebugRegisterWrites.sitesAfter(board.machine(), textVa, textPa, length));
        return Arm64DebugRegisterWrites.watch(board.machine(), sites);
    }

    /** The host breakpoints at the kernel's {@code wfe}s and {@code yield}s that end a spinning vCPU's quantum ({@link SpinWaitYields}; several CPUs). */
    private int spinWaitSites;

    /**
     * {@link SpinWaitYields} at every {@code wfe} and {@code yield} of the kernel's text ({@code
     * _stext} to {@code _etext}) as the Image holds it, so a restored snapshot gets the same sites.
     */
    private int yieldAtSpinWaits() throws KernelImageException {
        SymbolTable syms = symbols();
        var start = syms.byName("_stext");
        var end = syms.byName("_etext");
        if (start.isEmpty() || end.isEmpty()) return 0;
        var offset = syms.fileOffset(start.get().address());
        if (offset.isEmpty()) return 0;
        long from = offset.getAsLong(), length = end.get().address() - start.get().address();
        return SpinWaitYields.yieldAt(board.machine(), SpinWaitYields.arm64Sites(start.get().address(), from,
                sink -> image.copyRange(from, length, sink)));
    }

    @Override public Arch arch() { return Arch.ARM64; }

    @Override public Machine machine() { return board.machine(); }

    @Override public ConsoleMonitor console() { return console; }

    @Override public HostArea hostArea() { return hostArea; }

    @Override public TerminalPort terminal() {
        var u = board.terminalUart();
        return u == null ? null : new TerminalPort() {
            @Override public int receiveSpace() { return u.receiveSpace(); }
            @Override public void receive(byte[] bytes) { u.input(bytes); }
        };
    }

    @Override public SymbolTable symbols() {
        try {
            return symbols.join();
        } catch (CompletionException e) {
            throw new IllegalStateException(e.getCause().getMessage(), e.getCause());
        }
    }

    @Override public dev.kpemu.image.OnDemandFileBytes kernelContents() { return image; }

    private dev.kpemu.image.KernelTextTables textTables;

    @Override public dev.kpemu.image.KernelTextTables kernelTextTables() {
        if (textTables == null) textTables = BootRunner.textTables(arch(), symbols(), kernelContents(), kernelPath);
        return textTables;
    }

    @Override public KernelStructs kernelStructs() throws KernelImageException {
        return KernelStructs.of(BtfLocator.fromArm64Image(image, name, symbols()).btf(), symbols(), Arch.ARM64);
    }

    @Override public String describe() {
        return String.format("arm64 Image at 0x%x (image_size 0x%x), device tree at 0x%x (%d bytes), initrd %s, %d MiB, cmdline \"%s\"",
                loaded.kernelBase(), loaded.header().effectiveSize(), loaded.dtbAddress(), loaded.dtbSize(),
                loaded.initrd() == null ? "none" : String.format("0x%x-0x%x", loaded.initrd().start(), loaded.initrd().end()),
                memoryMiB, loaded.cmdline());
    }

    @Override public long interrupts() { return board.machine().irqsTaken(); }

    @Override public String stats() {
        Arm64Machine m = board.machine();
        String cpus = m.cpuCount() == 1 ? "" : String.format("cpus=%d switches=%d spinYields=%d spinWaitSites=%d icIvau=%d icIallu=%d ", m.cpuCount(), m.cpuSwitches(), m.quantumYields(), spinWaitSites,
                m.lineInvalidations(), m.allInvalidations());
        return cpus + String.format("irqs=%d exceptions=%d gicAcks=%d watchStops=%d sysregInsns=%d sysregJava=%d timerAccesses=%d uartBytes=%d",
                m.irqsTaken(), m.exceptionsTaken(), board.gic().acknowledged(), m.interruptWatchStops(),
                board.timer().sysRegInstructions(), board.timer().javaHookCalls(), board.timer().accesses(), board.uart().transmitted())
                + String.format(" watchRegWriteSites=%d", debugRegisterWrites)
                + (m.debugRegisters().exceptionsDelivered() == 0 ? "" : " guestWatchpointTraps=" + m.debugRegisters().exceptionsDelivered());
    }

    @Override public void close() { board.close(); }
}
