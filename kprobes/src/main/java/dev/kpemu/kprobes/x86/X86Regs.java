package dev.kpemu.kprobes.x86;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import dev.kpemu.kprobes.LiveRegs;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.machine.x86.X86Machine;
import dev.kpemu.unicorn.X86Reg;

/**
 * x86-64 {@code pt_regs}, read and written straight through to the vCPU; during a hit from one
 * engine batch ({@link LiveRegs}).
 */
public final class X86Regs extends LiveRegs {
    /** System V / kernel argument registers. */
    private static final int[] ARGS = {X86Reg.RDI, X86Reg.RSI, X86Reg.RDX, X86Reg.RCX, X86Reg.R8, X86Reg.R8 + 1};
    /** General registers by ModRM/REX number (rax=0 … r15=15). */
    static final int[] GPR = {X86Reg.RAX, X86Reg.RCX, X86Reg.RDX, X86Reg.RBX, X86Reg.RSP, X86Reg.RBP, X86Reg.RSI, X86Reg.RDI,
        X86Reg.R8, X86Reg.R8 + 1, X86Reg.R8 + 2, X86Reg.R8 + 3, X86Reg.R8 + 4, X86Reg.R8 + 5, X86Reg.R8 + 6, X86Reg.R15};
    private static final Map<String, Integer> NAMES = new LinkedHashMap<>();

    static {
        String[] gpr = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"};
        for (int i = 0; i < 16; i++) NAMES.put(gpr[i], GPR[i]);
        NAMES.put("rip", X86Reg.RIP);
        NAMES.put("rflags", X86Reg.RFLAGS);
        NAMES.put("cs", X86Reg.CS);
        NAMES.put("ss", X86Reg.SS);
        NAMES.put("ds", X86Reg.DS);
        NAMES.put("es", X86Reg.ES);
        NAMES.put("fs", X86Reg.FS);
        NAMES.put("gs", X86Reg.GS);
        NAMES.put("fs_base", X86Reg.FS_BASE);
        NAMES.put("gs_base", X86Reg.GS_BASE);
        NAMES.put("cr0", X86Reg.CR0);
        NAMES.put("cr2", X86Reg.CR2);
        NAMES.put("cr3", X86Reg.CR3);
        NAMES.put("cr4", X86Reg.CR4);
    }

    /**
     * What every hit reads ({@link LiveRegs}' core set): RFLAGS (the interrupt flag), GS_BASE (the
     * per-CPU base that finds {@code current}) and the control registers the page tables are
     * walked from ({@link #hitTables}); the registers handlers read besides join at their first read.
     */
    private static final int[] HIT = {X86Reg.RFLAGS, X86Reg.GS_BASE, X86Reg.CR0, X86Reg.CR4, X86Reg.CR3};

    private final Machine machine;
    private final dev.kpemu.kprobes.RegisterBatches batches;

    public X86Regs(Machine machine) {
        super(machine, new int[0][], HIT);
        this.machine = machine;
        this.batches = new dev.kpemu.kprobes.RegisterBatches(machine, X86Regs::engineId);
    }

    @Override public Arch arch() { return Arch.X86_64; }

    @Override public String ipName() { return "rip"; }

    @Override public String spName() { return "rsp"; }

    @Override public long ip() { return read(X86Reg.RIP); }

    @Override public void setIp(long ip) { write(X86Reg.RIP, ip); }

    @Override public long sp() { return read(X86Reg.RSP); }

    @Override public void setSp(long sp) { write(X86Reg.RSP, sp); }

    @Override public long returnValue() { return read(X86Reg.RAX); }

    @Override public void setReturnValue(long value) { write(X86Reg.RAX, value); }

    @Override
    public long arg(int n) {
        if (n < 0) throw new IllegalArgumentException("argument " + n);
        if (n < ARGS.length) return read(ARGS[n]);
        return machine.readVirtualLong(sp() + 8L * (n - ARGS.length + 1)); // above the return address
    }

    @Override
    public void setArg(int n, long value) {
        if (n < 0) throw new IllegalArgumentException("argument " + n);
        if (n < ARGS.length) write(ARGS[n], value);
        else machine.writeVirtualLong(sp() + 8L * (n - ARGS.length + 1), value);
    }

    @Override protected void outsideHit(String[] names, long[] out) { batches.read(names, out); }

    @Override protected PageTableWalker currentTables() { return machine.pageTables(); }

    @Override
    protected PageTableWalker hitTables() {
        return ((X86Machine) machine).walker().over(read(X86Reg.CR0), read(X86Reg.CR4), read(X86Reg.CR3));
    }

    @Override public List<String> names() { return List.copyOf(NAMES.keySet()); }

    @Override public long readLong(long va) { return machine.readVirtualLong(va); }

    long flags() { return read(X86Reg.RFLAGS); }

    void setFlags(long f) { write(X86Reg.RFLAGS, f); }

    long gpr(int n) { return read(GPR[n]); }

    void setGpr(int n, long v) { write(GPR[n], v); }

    void push(long v) {
        long sp = sp() - 8;
        machine.writeVirtualLong(sp, v);
        setSp(sp);
    }

    long pop() {
        long sp = sp();
        long v = machine.readVirtualLong(sp);
        setSp(sp + 8);
        return v;
    }

    @Override protected int id(String name) { return engineId(name); }

    private static int engineId(String name) {
        Integer id = NAMES.get(name.toLowerCase(java.util.Locale.ROOT));
        if (id == null) throw new IllegalArgumentException("no x86-64 register named " + name);
        return id;
    }
}
