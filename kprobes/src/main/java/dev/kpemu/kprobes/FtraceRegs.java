package dev.kpemu.kprobes;

import java.util.List;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.PageTableWalker;

/**
 * The registers the handlers of a kprobe on an ftrace site see (x86-64 {@code KPROBE_FLAG_FTRACE}):
 * the live vCPU registers, read and written through, except {@code orig_ax}, which Linux's ftrace
 * trampoline leaves 0 in the {@code pt_regs} it builds (recorded: {@code %orig_ax} prints 0 at
 * do_sys_openat2's entry on Debian's 6.1, 6.12 and 7.2; an {@code int3} frame holds -1).
 */
final class FtraceRegs implements Regs {
    private final Regs live;

    FtraceRegs(Regs live) { this.live = live; }

    @Override public Arch arch() { return live.arch(); }

    @Override public String ipName() { return live.ipName(); }

    @Override public String spName() { return live.spName(); }

    @Override public long origAx() { return 0; }

    @Override public Entry entry() { return Entry.FTRACE; }

    @Override public long ip() { return live.ip(); }

    @Override public void setIp(long ip) { live.setIp(ip); }

    @Override public long sp() { return live.sp(); }

    @Override public void setSp(long sp) { live.setSp(sp); }

    @Override public long returnValue() { return live.returnValue(); }

    @Override public void setReturnValue(long value) { live.setReturnValue(value); }

    @Override public long arg(int n) { return live.arg(n); }

    @Override public void setArg(int n, long value) { live.setArg(n, value); }

    @Override public long get(String name) { return live.get(name); }

    @Override public void getAll(String[] names, long[] out) { live.getAll(names, out); }

    @Override public void set(String name, long value) { live.set(name, value); }

    @Override public List<String> names() { return live.names(); }

    @Override public long readLong(long va) { return live.readLong(va); }

    @Override public PageTableWalker pageTables() { return live.pageTables(); }
}
