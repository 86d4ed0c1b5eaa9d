package dev.kpemu.kprobes;

import java.util.List;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.PageTableWalker;

/**
 * The registers an optimized probe's handlers see: the live vCPU registers (the detour's hand-off
 * is its first instruction, so they are the guest's registers at the probe), except the
 * instruction pointer, which reads as the breakpoint path shows it (x86 probe + 1 as after an
 * {@code int3}, as Linux's {@code optimized_callback} sets; arm64 the probe address, as for a
 * {@code BRK} probe) and whose changes are ignored, as Linux ignores them for an optimized probe;
 * the stack pointer is read-only too (Linux's detour does not restore {@code regs->sp}).
 */
final class OptimizedRegs implements Regs {
    private final Regs live;
    private final String ipName, spName;
    private long ip;

    OptimizedRegs(Regs live) {
        this.live = live;
        this.ipName = live.ipName();
        this.spName = live.spName();
    }

    OptimizedRegs at(long ip) {
        this.ip = ip;
        return this;
    }

    @Override public Arch arch() { return live.arch(); }

    @Override public Entry entry() { return Entry.JUMP; }

    @Override public long ip() { return ip; }

    /** Ignored: an optimized probe cannot change the execution path. */
    @Override public void setIp(long ip) {}

    @Override public long sp() { return live.sp(); }

    /** Ignored, as for a Linux optprobe. */
    @Override public void setSp(long sp) {}

    @Override public long returnValue() { return live.returnValue(); }

    @Override public void setReturnValue(long value) { live.setReturnValue(value); }

    @Override public long arg(int n) { return live.arg(n); }

    @Override public void setArg(int n, long value) { live.setArg(n, value); }

    @Override
    public long get(String name) {
        return name.equalsIgnoreCase(ipName) ? ip : live.get(name);
    }

    @Override
    public void set(String name, long value) {
        if (!name.equalsIgnoreCase(ipName) && !name.equalsIgnoreCase(spName)) live.set(name, value);
    }

    @Override public List<String> names() { return live.names(); }

    @Override public String ipName() { return ipName; }

    @Override public String spName() { return spName; }

    @Override public long readLong(long va) { return live.readLong(va); }

    @Override public PageTableWalker pageTables() { return live.pageTables(); }
}
