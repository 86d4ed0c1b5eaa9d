package dev.kpemu.kprobes.arm64;

import java.util.ArrayList;
import java.util.List;

import dev.kpemu.kprobes.LiveRegs;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.machine.arm64.Arm64PageWalker;
import dev.kpemu.unicorn.Arm64Reg;

/**
 * arm64 {@code pt_regs} ({@code x0–x30}, {@code sp}, {@code pc}, {@code pstate}), read and written
 * straight through; during a hit from one engine batch ({@link LiveRegs}). {@link #get} also
 * knows {@code sp_el0} (the kernel's {@code current}), which is no {@code pt_regs} member and
 * not among {@link #names()}.
 */
public final class Arm64Regs extends LiveRegs {
    private static final List<String> NAMES;

    static {
        List<String> n = new ArrayList<>();
        for (int i = 0; i <= 30; i++) n.add("x" + i);
        n.addAll(List.of("lr", "sp", "pc", "pstate"));
        NAMES = List.copyOf(n);
    }

    /** SCTLR_EL1 and TCR_EL1 by encoding (no plain engine id): the hit set's system registers 0 and 1. */
    private static final int[][] HIT_SYSTEM = {{3, 0, 1, 0, 0}, {3, 0, 2, 0, 2}};
    /**
     * What every hit reads ({@link LiveRegs}' core set): PSTATE (the interrupt mask), SP_EL0 (the
     * kernel's {@code current}) and, with {@link #HIT_SYSTEM}, the registers the page tables are
     * walked from; the registers handlers read besides join at their first read.
     */
    private static final int[] HIT = {Arm64Reg.PSTATE, Arm64Reg.SP_EL0, Arm64Reg.TTBR0_EL1, Arm64Reg.TTBR1_EL1};

    private final Machine machine;
    private final dev.kpemu.kprobes.RegisterBatches batches;

    public Arm64Regs(Machine machine) {
        super(machine, HIT_SYSTEM, HIT);
        this.machine = machine;
        this.batches = new dev.kpemu.kprobes.RegisterBatches(machine, Arm64Regs::engineId);
    }

    /** Unicorn's id of {@code xN} (0–30). */
    static int x(int n) {
        return switch (n) {
            case 29 -> Arm64Reg.X29;
            case 30 -> Arm64Reg.X30;
            default -> {
                if (n < 0 || n > 28) throw new IllegalArgumentException("x" + n);
                yield Arm64Reg.X0 + n;
            }
        };
    }

    /** {@code xN}, with register 31 reading as zero (XZR), as the simulators need. */
    long xzr(int n) { return n == 31 ? 0 : read(x(n)); }

    /** Writes {@code xN}; writes to register 31 (XZR) are discarded. */
    void setXzr(int n, long v) { if (n != 31) write(x(n), v); }

    long nzcv() { return read(Arm64Reg.NZCV); }

    @Override public Arch arch() { return Arch.ARM64; }

    @Override public String ipName() { return "pc"; }

    @Override public String spName() { return "sp"; }

    @Override public long ip() { return read(Arm64Reg.PC); }

    @Override public void setIp(long ip) { write(Arm64Reg.PC, ip); }

    @Override public long sp() { return read(Arm64Reg.SP); }

    @Override public void setSp(long sp) { write(Arm64Reg.SP, sp); }

    @Override public long returnValue() { return read(Arm64Reg.X0); }

    @Override public void setReturnValue(long value) { write(Arm64Reg.X0, value); }

    /** x0–x7; 0 beyond, as the kernel's {@code regs_get_kernel_argument} on arm64. */
    @Override
    public long arg(int n) {
        if (n < 0) throw new IllegalArgumentException("argument " + n);
        return n < 8 ? read(x(n)) : 0;
    }

    @Override
    public void setArg(int n, long value) {
        if (n < 0 || n >= 8) throw new IllegalArgumentException("arm64 register arguments are x0-x7");
        write(x(n), value);
    }

    @Override protected void outsideHit(String[] names, long[] out) { batches.read(names, out); }

    @Override protected PageTableWalker currentTables() { return machine.pageTables(); }

    @Override
    protected PageTableWalker hitTables() {
        return new Arm64PageWalker(machine.memory(), hitSystemRegister(0), hitSystemRegister(1), read(Arm64Reg.TTBR0_EL1),
                read(Arm64Reg.TTBR1_EL1));
    }

    @Override public List<String> names() { return NAMES; }

    @Override public long readLong(long va) { return machine.readVirtualLong(va); }

    @Override protected int id(String name) { return engineId(name); }

    private static int engineId(String name) {
        String n = name.toLowerCase(java.util.Locale.ROOT);
        return switch (n) {
            case "sp_el0" -> Arm64Reg.SP_EL0;
            case "lr" -> Arm64Reg.X30;
            case "fp" -> Arm64Reg.X29;
            case "sp" -> Arm64Reg.SP;
            case "pc" -> Arm64Reg.PC;
            case "pstate" -> Arm64Reg.PSTATE;
            default -> {
                if (n.startsWith("x")) {
                    try {
                        yield x(Integer.parseInt(n.substring(1)));
                    } catch (IllegalArgumentException e) {
                        // fall through to the error
                    }
                }
                throw new IllegalArgumentException("no arm64 register named " + name);
            }
        };
    }
}
