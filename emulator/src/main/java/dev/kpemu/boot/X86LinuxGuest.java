package dev.kpemu.boot;

import java.nio.file.Path;
import java.util.List;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.image.btf.BtfLocator;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.board.X86Pc;
import dev.kpemu.unicorn.X86Reg;

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
            X86LinuxGuest g = new X86LinuxGuest(pc, con, kf, l, new HostArea(guestRam, HOST_AREA_BYTES), o.memoryMiB(), kernelPath);
            if (o.cpus() > 1) g.apicBaseMsrs = g.answerApicBaseMsr();
            return g;
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

    /** MSR 0x1B. */
    static final int MSR_APIC_BASE = dev.kpemu.machine.x86.devices.LocalApic.MSR_APIC_BASE;
    /** The paravirt MSR functions {@link #answerApicBaseMsr} looks for, in the kernel's symbols. */
    static final List<String> MSR_FUNCTIONS = List.of("native_read_msr", "native_read_msr_safe", "native_write_msr", "native_write_msr_safe");

    /** The MSR functions {@link #answerApicBaseMsr} answers for (empty: none found, or one CPU). */
    private List<String> apicBaseMsrs = List.of();

    /** The paravirt MSR functions whose MSR 0x1B accesses the local APICs answer (several CPUs), in {@link #MSR_FUNCTIONS}' order. */
    List<String> apicBaseMsrFunctions() { return apicBaseMsrs; }

    /**
     * Answers the kernel's IA32_APIC_BASE (MSR 0x1B) reads and writes from each CPU's local APIC
     * ({@code LocalApic.apicBase}: base 0xfee00000, enable, and the BSP bit on CPU 0), which
     * Unicorn 2.1.4 cannot: its engine reads that MSR as 0 and drops writes, and it offers no hook
     * on RDMSR/WRMSR. Linux 6.9+ ({@code check_for_real_bsp} in {@code arch/x86/kernel/cpu/topology.c})
     * reads the BSP bit while it enumerates the MADT's CPUs and, not finding it, takes itself for a
     * crash kernel and keeps one CPU ("Enumerated BSP APIC 0 is not marked in APICBASE MSR").
     * Debian's kernels are paravirt ({@code CONFIG_PARAVIRT_XXL}): {@code rdmsrl}/{@code wrmsrl} and
     * their {@code _safe} forms call {@code pv_ops.cpu.read_msr} etc., whose native functions
     * ({@link #MSR_FUNCTIONS}) hold the only RDMSR/WRMSR of those paths. A host breakpoint on each
     * one's entry (never a change to guest text) looks at the MSR number (EDI): for 0x1B it does
     * what the function does — the value in RAX ({@code _safe}: 0 stored through RSI's error
     * pointer, the read; EAX 0, the write) — and returns to the caller (RIP popped from the stack),
     * skipping the instruction; any other MSR runs the function as it is. Not seen: an inline
     * {@code native_rdmsr}/{@code __rdmsr} of MSR 0x1B outside these functions (none in 6.12's
     * {@code arch/x86}), and RDMSR/WRMSR of the MSR in user space (a #GP there anyway).
     * Returns the functions found.
     */
    private List<String> answerApicBaseMsr() {
        List<String> found = new java.util.ArrayList<>();
        Machine m = pc.machine();
        for (String name : MSR_FUNCTIONS) {
            var sym = symbols().byName(name);
            if (sym.isEmpty()) continue;
            found.add(name);
            boolean read = name.contains("read"), safe = name.endsWith("_safe");
            m.addBreakpoint(sym.get().address(), (mm, at) -> {
                var uc = mm.engine();
                if ((int) uc.regRead(X86Reg.RDI) != MSR_APIC_BASE) return true;
                var apic = pc.localApic(mm.cpu());
                if (read) {
                    uc.regWrite(X86Reg.RAX, apic.apicBase());
                    if (safe) mm.writeVirtual(uc.regRead(X86Reg.RSI), new byte[4]);
                } else {
                    apic.writeApicBase((uc.regRead(X86Reg.RSI) & 0xffff_ffffL) | (uc.regRead(X86Reg.RDX) << 32));
                    if (safe) uc.regWrite(X86Reg.RAX, 0);
                }
                long sp = uc.regRead(X86Reg.RSP);
                long ret = mm.readVirtualLong(sp);
                uc.regWrite(X86Reg.RSP, sp + 8);
                mm.setPc(ret);
                return true;
            });
        }
        return List.copyOf(found);
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
                loaded.initrdBase(), loaded.initrdSize(), memoryMiB, loaded.cmdline())
                + (pc.cpus() == 1 ? "" : ", " + pc.cpus() + " CPUs, MSR 0x1B answered in " + (apicBaseMsrs.isEmpty() ? "no function" : String.join(", ", apicBaseMsrs)));
    }

    @Override public long interrupts() { return pc.machine().externalInterrupts(); }

    @Override public String stats() {
        return "exceptions=" + pc.machine().exceptionsDelivered() + " uartBytes=" + pc.uart().transmitted();
    }

    @Override public void close() { pc.close(); }
}
