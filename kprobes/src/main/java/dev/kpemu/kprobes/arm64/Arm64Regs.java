package dev.kpemu.kprobes.arm64;

import java.util.ArrayList;
import java.util.List;

import dev.kpemu.kprobes.Regs;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;

/** arm64 {@code pt_regs} ({@code x0–x30}, {@code sp}, {@code pc}, {@code pstate}), read and written straight through. */
public final class Arm64Regs implements Regs {
    private static final List<String> NAMES;

    static {
        List<String> n = new ArrayList<>();
        for (int i = 0; i <= 30; i++) n.add("x" + i);
        n.addAll(List.of("lr", "sp", "pc", "pstate"));
        NAMES = List.copyOf(n);
    }

    private final Machine machine;
    private final Unicorn uc;
    private final dev.kpemu.kprobes.RegisterBatches batches;

    Arm64Regs(Machine machine) {
        this.machine = machine;
        this.uc = machine.engine();
        this.batches = new dev.kpemu.kprobes.RegisterBatches(uc, Arm64Regs::id);
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
    long xzr(int n) { return n == 31 ? 0 : uc.regRead(x(n)); }

    /** Writes {@code xN}; writes to register 31 (XZR) are discarded. */
    void setXzr(int n, long v) { if (n != 31) uc.regWrite(x(n), v); }

    long nzcv() { return uc.regRead(Arm64Reg.NZCV); }

    @Override public Arch arch() { return Arch.ARM64; }

    @Override public String ipName() { return "pc"; }

    @Override public String spName() { return "sp"; }

    @Override public long ip() { return uc.regRead(Arm64Reg.PC); }

    @Override public void setIp(long ip) { uc.regWrite(Arm64Reg.PC, ip); }

    @Override public long sp() { return uc.regRead(Arm64Reg.SP); }

    @Override public void setSp(long sp) { uc.regWrite(Arm64Reg.SP, sp); }

    @Override public long returnValue() { return uc.regRead(Arm64Reg.X0); }

    @Override public void setReturnValue(long value) { uc.regWrite(Arm64Reg.X0, value); }

    /** x0–x7; 0 beyond, as the kernel's {@code regs_get_kernel_argument} on arm64. */
    @Override
    public long arg(int n) {
        if (n < 0) throw new IllegalArgumentException("argument " + n);
        return n < 8 ? uc.regRead(x(n)) : 0;
    }

    @Override
    public void setArg(int n, long value) {
        if (n < 0 || n >= 8) throw new IllegalArgumentException("arm64 register arguments are x0-x7");
        uc.regWrite(x(n), value);
    }

    @Override public long get(String name) { return uc.regRead(id(name)); }

    @Override public void getAll(String[] names, long[] out) { batches.read(names, out); }

    @Override public void set(String name, long value) { uc.regWrite(id(name), value); }

    @Override public List<String> names() { return NAMES; }

    @Override public long readLong(long va) { return machine.readVirtualLong(va); }

    private static int id(String name) {
        String n = name.toLowerCase(java.util.Locale.ROOT);
        return switch (n) {
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
