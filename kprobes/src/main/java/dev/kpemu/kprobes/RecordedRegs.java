package dev.kpemu.kprobes;

import java.util.List;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.machine.RecordedProbeHits;

/**
 * The registers of a recorded hit on an ftrace site ({@link RecordedHit}): what {@link FtraceRegs}
 * shows at the hit (orig_ax 0, the ip past the {@code int3}), from the values read there. Only the
 * registers captured ({@code names}); asking for another, writing one or walking memory is a defect
 * of the handler that said it was recordable, and fails.
 */
final class RecordedRegs implements Regs {
    private final Arch arch;
    private final String[] names;
    private final int ip, sp, ax;
    private final int[] args;
    private RecordedProbeHits.Record record;

    RecordedRegs(Arch arch, String[] names) {
        if (arch != Arch.X86_64) throw new IllegalArgumentException("recorded hits are x86-64's");
        this.arch = arch;
        this.names = names.clone();
        this.ip = index("rip");
        this.sp = index("rsp");
        this.ax = index("rax");
        this.args = new int[] {index("rdi"), index("rsi"), index("rdx"), index("rcx"), index("r8"), index("r9")};
    }

    void at(RecordedProbeHits.Record r) { this.record = r; }

    private int index(String name) {
        for (int i = 0; i < names.length; i++) if (names[i] == name) return i;   // the callers' constant names: one compare each
        for (int i = 0; i < names.length; i++) if (names[i].equals(name)) return i;
        throw new IllegalStateException("register " + name + " is not recorded at a hit");
    }

    @Override public Arch arch() { return arch; }

    @Override public String ipName() { return "rip"; }

    @Override public String spName() { return "rsp"; }

    @Override public long origAx() { return 0; }

    @Override public Entry entry() { return Entry.FTRACE; }

    @Override public long ip() { return record.register(ip); }

    @Override public long sp() { return record.register(sp); }

    @Override public long returnValue() { return record.register(ax); }

    @Override
    public long arg(int n) {
        if (n < 0 || n >= args.length) throw new IllegalStateException("argument " + n + " is not recorded at a hit");
        return record.register(args[n]);
    }

    @Override public long get(String name) { return record.register(index(name)); }

    @Override public List<String> names() { return List.of(names); }

    private static UnsupportedOperationException readOnly() {
        return new UnsupportedOperationException("a recorded hit's registers are read only");
    }

    @Override public void setIp(long ip) { throw readOnly(); }

    @Override public void setSp(long sp) { throw readOnly(); }

    @Override public void setReturnValue(long value) { throw readOnly(); }

    @Override public void setArg(int n, long value) { throw readOnly(); }

    @Override public void set(String name, long value) { throw readOnly(); }

    @Override public long readLong(long va) { throw new IllegalStateException("a recorded hit reads no guest memory"); }

    @Override public PageTableWalker pageTables() { throw new IllegalStateException("a recorded hit walks no page tables"); }
}
