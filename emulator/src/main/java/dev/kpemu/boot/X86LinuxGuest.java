package dev.kpemu.boot;

import java.nio.file.Path;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.image.btf.BtfLocator;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.board.X86Pc;

/** An x86-64 Linux guest on kpemu's PC ({@link X86Pc}), loaded by the 64-bit boot protocol. */
final class X86LinuxGuest implements LinuxGuest {
    /** The default x86-64 command line (see docs/x86-boot-notes.md). */
    static final String DEFAULT_APPEND = "console=ttyS0 nokaslr";

    private final X86Pc pc;
    private final ConsoleMonitor console;
    /** The ELF vmlinux (the bzImage's own bytes are not kept once loaded: 8 MiB of heap for Debian's). */
    private final dev.kpemu.image.ElfImage vmlinux;
    private final boolean fromBzImage;
    private final X86LinuxLoader.Loaded loaded;
    private final HostArea hostArea;
    private final int memoryMiB;
    /** The kernel file as given (the bzImage, or a vmlinux): what the text tables' cache is keyed by. */
    private final Path kernelPath;
    private SymbolTable symbols;

    private X86LinuxGuest(X86Pc pc, ConsoleMonitor console, X86LinuxLoader.KernelFile kernel, X86LinuxLoader.Loaded loaded,
                          HostArea hostArea, int memoryMiB, Path kernelPath) {
        this.pc = pc;
        this.console = console;
        this.vmlinux = kernel.vmlinux();
        this.fromBzImage = kernel.bzImage() != null;
        this.loaded = loaded;
        this.hostArea = hostArea;
        this.memoryMiB = memoryMiB;
        this.kernelPath = kernelPath;
    }

    /** {@code fromSnapshot}: a snapshot's RAM follows, so the kernel and initrd are not written into RAM. */
    static X86LinuxGuest prepare(BootRunner.Options o, Path kernelPath, byte[] initrd, boolean fromSnapshot) throws KernelImageException {
        X86LinuxLoader.KernelFile kf = X86LinuxLoader.readKernel(kernelPath, BootRunner.kernelCacheDir());
        String append = o.append() == null ? DEFAULT_APPEND : o.append();
        long ram = (long) o.memoryMiB() << 20;
        long guestRam = ram - HOST_AREA_BYTES;
        X86Pc[] ref = new X86Pc[1];
        ConsoleMonitor con = BootRunner.consoleMonitor(o, () -> ref[0] == null ? 0 : ref[0].machine().clock().liveNanos());
        X86Pc pc = new X86Pc(ram, con, false, o.terminal() == null ? null : o.terminal().output(), interrupts(o), o.cpus());
        ref[0] = pc;
        try {
            if (o.cpus() > 1) pc.machine().setSchedule(dev.kpemu.machine.Schedule.of(o.schedSeed()));
            X86LinuxLoader.Loaded l = X86LinuxLoader.load(pc.machine(), kf, initrd, append, guestRam, pc.rsdp(), !fromSnapshot);
            return new X86LinuxGuest(pc, con, kf, l, new HostArea(guestRam, HOST_AREA_BYTES), o.memoryMiB(), kernelPath);
        } catch (KernelImageException | RuntimeException e) {
            pc.close();
            throw e;
        }
    }

    /**
     * The PC's interrupt controllers: the APIC board with {@code withX86Apic} or with more than one
     * CPU (several CPUs imply it: only local APICs start APs, and the reference machine, QEMU's
     * {@code pc -smp N}, has them), else the 8259 pair alone (the default machine, unchanged).
     */
    static X86Pc.Interrupts interrupts(BootRunner.Options o) {
        return o.x86Apic() || o.cpus() > 1 ? X86Pc.Interrupts.APIC : X86Pc.Interrupts.PIC;
    }

    @Override public Arch arch() { return Arch.X86_64; }

    @Override public Machine machine() { return pc.machine(); }

    @Override public ConsoleMonitor console() { return console; }

    @Override public HostArea hostArea() { return hostArea; }

    @Override public TerminalPort terminal() {
        var u = pc.terminalUart();
        return u == null ? null : new TerminalPort() {
            @Override public int receiveSpace() { return u.receiveSpace(); }
            @Override public void receive(byte[] bytes) { u.receive(bytes); }
        };
    }

    @Override public SymbolTable symbols() {
        if (symbols == null) {
            try {
                symbols = BootRunner.symbols(kernelPath, linkBase -> vmlinux::fileOffsetOf, () -> Kallsyms.fromElf(vmlinux));
            } catch (KernelImageException e) {
                throw new IllegalStateException(e.getMessage(), e);
            }
        }
        return symbols;
    }

    @Override public dev.kpemu.image.OnDemandFileBytes kernelContents() { return vmlinux.contents(); }

    private dev.kpemu.image.KernelTextTables textTables;

    @Override public dev.kpemu.image.KernelTextTables kernelTextTables() {
        if (textTables == null) textTables = BootRunner.textTables(arch(), symbols(), kernelContents(), kernelPath);
        return textTables;
    }

    @Override public KernelStructs kernelStructs() throws KernelImageException {
        return KernelStructs.of(BtfLocator.fromElf(vmlinux, symbols()).btf(), symbols(), Arch.X86_64);
    }

    @Override public String describe() {
        return String.format("x86_64 %s, boot protocol %x, entry 0x%x, initrd 0x%x+0x%x, %d MiB, cmdline \"%s\"",
                fromBzImage ? "bzImage" : "vmlinux", loaded.protocolVersion(), loaded.entry(),
                loaded.initrdBase(), loaded.initrdSize(), memoryMiB, loaded.cmdline());
    }

    @Override public long interrupts() { return pc.machine().externalInterrupts(); }

    @Override public String stats() {
        return "exceptions=" + pc.machine().exceptionsDelivered() + " uartBytes=" + pc.uart().transmitted();
    }

    @Override public void close() { pc.close(); }
}
