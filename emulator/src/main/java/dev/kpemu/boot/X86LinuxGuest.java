package dev.kpemu.boot;

import java.nio.file.Path;
import java.util.List;
import dev.kpemu.image.ElfImage;
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
    /** The host breakpoints after the kernel's writes of a debug register ({@link X86DebugRegisterWrites}). */
    private int debugRegisterWrites;

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
            g.debugRegisterWrites = X86DebugRegisterWrites.watch(pc.machine(), kernelPath, kf.vmlinux());
            keepInitStackWritable(pc.machine(), kf.vmlinux());
            if (!fromSnapshot) keepBssClearWritable(pc.machine(), kf.vmlinux());   // a snapshot's kernel has cleared it
            if (o.cpus() > 1) {
                g.apicBaseMsrs = g.answerApicBaseMsr();
                g.textPokeFunctions = g.keepPatchedTextCoherent();
                g.spinWaitSites = yieldAtSpinWaits(pc.machine(), kf.vmlinux());
                pc.machine().registerState("x86-linux-smp", g.new SmpState());
            }
            return g;
        } catch (KernelImageException | RuntimeException e) {
            pc.close();
            throw e;
        }
    }

    /**
     * Keeps init_task's stack out of Unicorn's store slow path ({@link Machine#keepStackPageWritable}
     * on the kernel's {@code .data}, where the stack is and no code is). Linux maps its image
     * writable and executable until {@code mark_rodata_ro}, near the end of the boot, and Unicorn
     * sends every store through such a mapping down its slow path: start_kernel's pushes and
     * stores on that stack (~15 M in a cold boot of Debian's 6.1) cost a tenth of the boot's CPU
     * (docs/reference.md). Nothing when the image has no {@code .data} or the natives cannot.
     */
    static boolean keepInitStackWritable(Machine m, ElfImage vmlinux) {
        var data = vmlinux.section(".data");
        if (data.isEmpty() || data.get().size() == 0 || data.get().addr() >= 0) return false;   // kernel (upper-half) addresses only
        return m.keepStackPageWritable(data.get().addr(), data.get().addr() + data.get().size());
    }

    /**
     * Keeps clear_bss's stores out of Unicorn's store slow path ({@link Machine#keepStringStoresWritable}
     * on the kernel's {@code .bss} up to the end of {@code .brk}, which hold no code). clear_bss
     * zeroes them with one {@code rep stosb} through the same writable and executable mapping as
     * {@link #keepInitStackWritable}'s stack: ~18 M slow stores, one per byte, in a cold boot of
     * Debian's 6.1 (docs/reference.md). Nothing when the image has no {@code .bss} or the natives cannot.
     */
    static boolean keepBssClearWritable(Machine m, ElfImage vmlinux) {
        var bss = vmlinux.section(".bss");
        if (bss.isEmpty() || bss.get().size() == 0 || bss.get().addr() >= 0) return false;   // kernel (upper-half) addresses only
        long end = bss.get().addr() + bss.get().size();
        var brk = vmlinux.section(".brk");
        if (brk.isPresent() && brk.get().addr() == end) end += brk.get().size();
        return m.keepStringStoresWritable(bss.get().addr(), end);
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
                msrCalls++;
                if ((int) uc.regRead(X86Reg.RDI) != MSR_APIC_BASE) return true;
                apicBaseAnswers++;
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

    /** The text-patching functions {@link #keepPatchedTextCoherent} watches (several CPUs), or empty. */
    private List<String> textPokeFunctions = List.of();
    /** The host breakpoints at the kernel's {@code pause}s that end a spinning vCPU's quantum ({@link SpinWaitYields}; several CPUs). */
    private int spinWaitSites;

    /** {@link SpinWaitYields} at every {@code pause} of the vmlinux's {@code .text}. */
    private static int yieldAtSpinWaits(Machine m, ElfImage vmlinux) throws KernelImageException {
        var text = vmlinux.section(".text");
        if (text.isEmpty()) return 0;
        long offset = text.get().offset(), size = text.get().size();
        return SpinWaitYields.yieldAt(m, SpinWaitYields.x86Sites(text.get().addr(), offset, sink -> vmlinux.copyFileRange(offset, size, sink)));
    }
    /** Per CPU, the text ranges other CPUs' {@code __text_poke} wrote since its last {@code do_sync_core}: [address, length] pairs. */
    private List<List<long[]>> pokedText = List.of();
    private long textSyncs, textRangesDropped, msrCalls, apicBaseAnswers;

    /**
     * Makes text the kernel patches on one CPU run patched on every CPU (issue 26, smp-notes step 3,
     * x86). Each vCPU's engine keeps its own translations, and a guest store drops only the storing
     * engine's (docs/smp-notes.md fact b); x86 has no instruction that tells the other CPUs (the
     * hardware's fetch is coherent), so the machine cannot see the moment itself. Linux's own
     * protocol for patching live text gives it: every runtime patch (jump labels, static calls,
     * ftrace, kprobes, the BPF JIT's {@code text_poke_copy}) is written by {@code __text_poke(func,
     * addr, src, len)} (through a temporary alias mapping), and then {@code text_poke_sync} makes
     * every online CPU run {@code do_sync_core} (an IPI to each other CPU, a call on its own) to
     * serialize before it may run the new bytes ({@code text_poke_bp_batch} syncs after the int3,
     * after the tail and after the first byte). Host breakpoints (guest text untouched) on the two
     * functions' entries: {@code __text_poke} records [addr, addr + len) (RSI, RCX: the text's own
     * kernel address, executable in every CPU's tables) for every other CPU; {@code do_sync_core}
     * on a CPU (in the kernel, where the address translates) drops that CPU's recorded ranges in its
     * own engine ({@code Machine.invalidateCode(cpu, …)}). So a CPU runs the old bytes until it
     * serializes, as hardware may, and the new ones after. BPF's new code has no sync of its own:
     * its ranges wait for the next (code no CPU ran before has no translation to be stale). Not
     * covered: module text (written before it is mapped executable) and user text. The kernel's
     * boot-time patching ({@code text_poke_early}, alternatives) runs before the APs start.
     * Returns the functions found.
     */
    private List<String> keepPatchedTextCoherent() {
        Machine m = pc.machine();
        var poke = symbols().byName("__text_poke");
        var sync = symbols().byName("do_sync_core");
        if (poke.isEmpty() || sync.isEmpty()) return List.of();
        int cpus = pc.cpus();
        pokedText = new java.util.ArrayList<>();
        for (int i = 0; i < cpus; i++) pokedText.add(new java.util.ArrayList<>());
        m.addBreakpoint(poke.get().address(), (mm, at) -> {
            var uc = mm.engine();
            long[] range = {uc.regRead(X86Reg.RSI), uc.regRead(X86Reg.RCX)};
            for (int i = 0; i < cpus; i++) {
                if (i == mm.cpu()) continue;       // the writer's own stores drop its own translations
                List<long[]> l = pokedText.get(i);
                if (l.size() < MAX_POKED_RANGES) l.add(range);
                else l.set(MAX_POKED_RANGES - 1, FLUSH_ALL);
            }
            return true;
        });
        m.addBreakpoint(sync.get().address(), (mm, at) -> {
            textSyncs++;
            List<long[]> l = pokedText.get(mm.cpu());
            for (long[] r : l) {
                if (r == FLUSH_ALL) mm.flushTranslations(); else mm.invalidateCode(mm.cpu(), r[0], r[1]);
            }
            textRangesDropped += l.size();
            l.clear();
            return true;
        });
        return List.of("__text_poke", "do_sync_core");
    }

    /**
     * The host-side state of {@link #keepPatchedTextCoherent} and {@link #answerApicBaseMsr} a
     * snapshot of several CPUs carries (the MSR's value itself is each local APIC's): every CPU's
     * text ranges still to drop at its next {@code do_sync_core}, and the counters.
     */
    private final class SmpState implements dev.kpemu.machine.Stateful {
        @Override public void saveState(java.io.DataOutput out) throws java.io.IOException {
            out.writeInt(pokedText.size());
            for (List<long[]> l : pokedText) {
                out.writeInt(l.size());
                for (long[] r : l) {
                    out.writeBoolean(r == FLUSH_ALL);
                    out.writeLong(r[0]);
                    out.writeLong(r[1]);
                }
            }
            for (long v : new long[] {textSyncs, textRangesDropped, msrCalls, apicBaseAnswers}) out.writeLong(v);
        }

        @Override public void restoreState(java.io.DataInput in) throws java.io.IOException {
            int cpus = in.readInt();
            if (cpus != pokedText.size()) throw new java.io.IOException("text-poke state of " + cpus + " CPUs, this guest keeps " + pokedText.size());
            for (List<long[]> l : pokedText) {
                int n = in.readInt();
                if (n < 0 || n > MAX_POKED_RANGES) throw new java.io.IOException("text-poke ranges out of range");
                l.clear();
                for (int i = 0; i < n; i++) {
                    boolean all = in.readBoolean();
                    long[] r = {in.readLong(), in.readLong()};
                    l.add(all ? FLUSH_ALL : r);
                }
            }
            textSyncs = in.readLong();
            textRangesDropped = in.readLong();
            msrCalls = in.readLong();
            apicBaseAnswers = in.readLong();
        }
    }

    /** Ranges a CPU keeps before it serializes; one more makes its next {@code do_sync_core} drop all code (every engine: a CPU long offline). */
    static final int MAX_POKED_RANGES = 4096;
    private static final long[] FLUSH_ALL = {0, 0};

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
                + (pc.cpus() == 1 ? "" : ", " + pc.cpus() + " CPUs, MSR 0x1B answered in " + (apicBaseMsrs.isEmpty() ? "no function" : String.join(", ", apicBaseMsrs))
                        + ", patched text kept coherent at " + (textPokeFunctions.isEmpty() ? "no function" : String.join(", ", textPokeFunctions))
                        + ", spin waits yield at " + spinWaitSites + " pause sites");
    }

    @Override public long interrupts() { return pc.machine().externalInterrupts(); }

    @Override public String stats() {
        long debugTraps = pc.machine().debugRegisters().exceptionsDelivered();
        return "exceptions=" + pc.machine().exceptionsDelivered() + " uartBytes=" + pc.uart().transmitted()
                + (debugTraps == 0 ? "" : " guestDebugTraps=" + debugTraps)
                + " initStackPagesMarked=" + pc.machine().stackPagesMarked()
                + " bssPagesMarked=" + pc.machine().stringStorePagesMarked()
                + (pc.cpus() == 1 ? "" : " cpuSwitches=" + pc.machine().cpuSwitches() + " spinYields=" + pc.machine().quantumYields() + " textPokeSyncs=" + textSyncs + " textRangesDropped=" + textRangesDropped
                        + " msrCalls=" + msrCalls + " apicBaseMsr=" + apicBaseAnswers);
    }

    @Override public void close() { pc.close(); }
}
