package dev.kpemu.optprobes;

import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.kprobes.SlotArea;
import dev.kpemu.kprobes.SymbolResolver;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.machine.x86.X86LongMode;
import dev.kpemu.machine.x86.X86Machine;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A bare-metal paged guest for engine-level optprobes tests, set up as the kprobes module's
 * {@code X86Guest}/{@code Arm64Guest} (kernel-style text address, the slot area where Linux's
 * would be: x86 the hole below the kernel text mapping, arm64 64 MiB above the text), but with
 * the functions given by each test and symbols of their exact size (the safety rules look at
 * function ends).
 */
final class EngineGuest implements AutoCloseable {
    // x86-64: low 16 MiB identity-mapped and again at 0xffffffff80000000
    static final long X86_KBASE = 0xffff_ffff_8000_0000L;
    static final long X86_TEXT = X86_KBASE + 0x10_0000, X86_DATA = X86_KBASE + 0x20_0000, X86_STACK = X86_KBASE + 0x8_0000;
    // arm64: first 32 MiB of RAM at 0xffff000000000000 through TTBR1
    static final long A_RAM = Arm64Layout.RAM_BASE, A_KVA = 0xffff_0000_0000_0000L;
    static final long A_TEXT = A_KVA + 0x10_0000, A_DATA = A_KVA + 0x20_0000, A_STACK = A_KVA + 0x8_0000;
    static final long A_SLOT_VA = A_KVA + 0x400_0000L, A_SLOT_PA = A_RAM + 0x300_0000, A_TABLES = A_RAM + 0x40_0000;

    final Arch arch;
    final Machine machine;
    final Map<String, Long> functions = new LinkedHashMap<>();
    final Map<String, Integer> sizes = new LinkedHashMap<>();
    final SlotArea slots;
    final long data;
    private final long haltStub;

    /** Function sources by name (x86 AT&T syntax; arm64 as Keystone takes it); "halt_stub" is added. */
    EngineGuest(Arch arch, Map<String, String> sources) {
        this.arch = arch;
        Map<String, String> all = new LinkedHashMap<>();
        all.put("halt_stub", arch == Arch.X86_64 ? "hlt\njmp halt_stub\n" : "wfi\nb halt_stub\n");
        all.putAll(sources);
        long text = arch == Arch.X86_64 ? X86_TEXT : A_TEXT;
        long at = text;
        for (String n : all.keySet()) {
            functions.put(n, at);
            at += 0x100;
        }
        StringBuilder defs = new StringBuilder();
        functions.forEach((n, a) -> defs.append(".set ").append(n).append(", ").append(a).append('\n'));
        this.data = arch == Arch.X86_64 ? X86_DATA : A_DATA;
        defs.append(".set DATA, ").append(data).append('\n');
        Map<String, byte[]> code = new LinkedHashMap<>();
        for (var e : all.entrySet()) {
            long a = functions.get(e.getKey());
            // a function's own label is defined by .set; use local labels inside bodies
            String src = defs.toString().replace(".set " + e.getKey() + ", " + a + "\n", "") + e.getKey() + ":\n" + e.getValue();
            byte[] b = arch == Arch.X86_64 ? Asm.x86(src, a) : Asm.arm64(src, a);
            if (b.length > 0x100) throw new IllegalArgumentException(e.getKey() + " longer than 0x100");
            code.put(e.getKey(), b);
            sizes.put(e.getKey(), b.length);
        }
        if (arch == Arch.X86_64) {
            X86Machine m = X86Machine.create(16 << 20);
            var mem = m.memory();
            X86LongMode.identityMap(mem, 0x1000, 16 << 20);
            mem.write(0x9000, new byte[0x1000]);
            mem.writeLong(0x1000 + 8 * 511, 0x9000 | 3);
            mem.writeLong(0x9000 + 8 * 510, 0x3000 | 3);
            int limit = X86LongMode.writeGdt(mem, 0x5000);
            X86LongMode.enter(m.engine(), X86_KBASE + 0x5000, limit, 0x1000);
            for (var e : code.entrySet()) mem.write(functions.get(e.getKey()) - X86_KBASE, e.getValue());
            machine = m;
            slots = new SlotArea(SlotArea.X86_KERNEL_DEFAULT_VA, 0xe0_0000, 0x20_0000);
        } else {
            Arm64Machine m = Arm64Machine.create(64L << 20);
            var mem = m.memory();
            long root0 = A_TABLES, root1 = A_TABLES + 0x1000, l1 = A_TABLES + 0x2000, l2 = A_TABLES + 0x3000;
            mem.write(A_TABLES, new byte[0x4000]);
            mem.writeLong(root1 + 8 * ((A_KVA >>> 39) & 0x1ff), l1 | 3);
            mem.writeLong(l1 + 8 * ((A_KVA >>> 30) & 0x1ff), l2 | 3);
            long attrs = (1L << 10) | (3L << 8) | 1;
            for (int i = 0; i < 16; i++) mem.writeLong(l2 + 8L * i, (A_RAM + ((long) i << 21)) | attrs);
            for (var e : code.entrySet()) mem.write(functions.get(e.getKey()) - A_KVA + A_RAM, e.getValue());
            m.setSysReg(3, 0, 10, 2, 0, 0xffL);                 // MAIR
            m.setSysReg(3, 0, 2, 0, 2, 0x5_b510_3510L);         // TCR
            m.setReg(Arm64Reg.TTBR0_EL1, root0);
            m.setReg(Arm64Reg.TTBR1_EL1, root1);
            m.setSysReg(3, 0, 1, 0, 0, 0x30d0_1805L);           // SCTLR, MMU on
            m.engine().flushTlb();
            machine = m;
            slots = new SlotArea(A_SLOT_VA, A_SLOT_PA, 0x20_0000);
        }
        haltStub = functions.get("halt_stub");
    }

    long sym(String name) {
        Long a = functions.get(name);
        if (a == null) throw new IllegalArgumentException(name);
        return a;
    }

    SymbolResolver symbols() {
        List<SymbolResolver.SymbolInfo> l = new ArrayList<>();
        functions.forEach((n, a) -> l.add(new SymbolResolver.SymbolInfo(n, a, sizes.get(n), true)));
        return SymbolResolver.of(l);
    }

    Kprobes kprobes() {
        return Kprobes.attach(machine, symbols(), slots);
    }

    /**
     * Adds a vCPU ({@link Machine#addCpu}) set up as vCPU 0 (the same page tables, kernel mode) with
     * stack pointer {@code sp} and starts it at {@code pc}; returns its index.
     */
    int startCpu(long pc, long sp) {
        int cpu = machine.addCpu();
        Unicorn uc = machine.engine(cpu);
        if (arch == Arch.X86_64) {
            int limit = X86LongMode.writeGdt(machine.memory(), 0x5000);     // the same bytes again: its limit
            X86LongMode.enter(uc, X86_KBASE + 0x5000, limit, 0x1000);
            uc.regWrite(X86Reg.RSP, sp);
        } else {
            uc.sysRegWrite(3, 0, 10, 2, 0, 0xffL);
            uc.sysRegWrite(3, 0, 2, 0, 2, 0x5_b510_3510L);
            uc.regWrite(Arm64Reg.TTBR0_EL1, A_TABLES);
            uc.regWrite(Arm64Reg.TTBR1_EL1, A_TABLES + 0x1000);
            uc.sysRegWrite(3, 0, 1, 0, 0, 0x30d0_1805L);
            uc.flushTlb();
            uc.regWrite(Arm64Reg.SP, sp);
        }
        machine.startCpu(cpu, pc);
        return cpu;
    }

    /** The stack top {@link #prepareCall} gives vCPU 0. */
    long stackTop() { return arch == Arch.X86_64 ? X86_STACK : A_STACK; }

    /** Sets up a call of {@code fn} returning to the halt stub. */
    void prepareCall(String fn, long... args) {
        if (arch == Arch.X86_64) {
            Unicorn uc = machine.engine();
            int[] regs = {X86Reg.RDI, X86Reg.RSI, X86Reg.RDX, X86Reg.RCX};
            for (int i = 0; i < args.length; i++) uc.regWrite(regs[i], args[i]);
            long sp = X86_STACK - 8;
            machine.writeVirtualLong(sp, haltStub);
            uc.regWrite(X86Reg.RSP, sp);
            uc.regWrite(X86Reg.RBP, 0);
        } else {
            Arm64Machine m = (Arm64Machine) machine;
            for (int i = 0; i < args.length; i++) m.setReg(Arm64Reg.X0 + i, args[i]);
            m.setReg(Arm64Reg.X30, haltStub);
            m.setReg(Arm64Reg.X29, 0);
            m.setReg(Arm64Reg.SP, A_STACK);
        }
        machine.setPc(sym(fn));
    }

    /** Runs to the halt stub and returns the return value. */
    long finish() {
        StopReason r = machine.run(Long.MAX_VALUE / 4);
        if (!(r instanceof StopReason.Halted)) throw new AssertionError("ended with " + r + " at pc 0x" + Long.toHexString(machine.pc()));
        return returnValue();
    }

    long call(String fn, long... args) {
        prepareCall(fn, args);
        return finish();
    }

    long returnValue() {
        return arch == Arch.X86_64 ? machine.engine().regRead(X86Reg.RAX) : ((Arm64Machine) machine).reg(Arm64Reg.X0);
    }

    byte[] text(String fn) {
        return machine.readVirtual(sym(fn), sizes.get(fn));
    }

    @Override
    public void close() {
        machine.close();
    }
}
