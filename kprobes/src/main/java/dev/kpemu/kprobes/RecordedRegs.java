package dev.kpemu.kprobes;

import java.util.List;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.machine.RecordedProbeHits;

/**
 * The registers of a recorded hit ({@link RecordedHit}) as the live view shows them there, from the
 * values read at the hit. x86-64 (an ftrace site): what {@link FtraceRegs} shows (orig_ax 0, the
 * ip past the {@code int3}). arm64 (a BRK): pt_regs as the breakpoint left it (the pc at the
 * probe, {@code lr} and {@code fp} for {@code x30} and {@code x29}, arguments x0–x7). Only the
 * registers captured ({@code names}); asking for another, writing one or walking memory is a
 * defect of the handler that said it was recordable, and fails.
 */
final class RecordedRegs implements Regs {
    private final Arch arch;
    private final String[] names;
    private final List<String> listed;
    private final int ip, sp, ret;
    private final int[] args;
    private RecordedProbeHits.Record record;

    private final Entry entry;

    /**
     * @param listed the names the live view lists ({@link Regs#names})
     * @param entry how the recorded hits' handlers are entered ({@link ArchKprobes#recordedEntry})
     */
    RecordedRegs(Arch arch, String[] names, List<String> listed, Entry entry) {
        this.arch = arch;
        this.entry = entry;
        this.names = names.clone();
        this.listed = List.copyOf(listed);
        if (arch == Arch.X86_64) {
            this.ip = index("rip");
            this.sp = index("rsp");
            this.ret = index("rax");
            this.args = new int[] {index("rdi"), index("rsi"), index("rdx"), index("rcx"), index("r8"), index("r9")};
        } else {
            this.ip = index("pc");
            this.sp = index("sp");
            this.ret = index("x0");
            this.args = new int[8];
            for (int i = 0; i < 8; i++) args[i] = index("x" + i);
        }
    }

    void at(RecordedProbeHits.Record r) { this.record = r; }

    /** Names asked for before that are other String objects than {@link #names}' (a probe's parsed %x0), and their index. */
    private final String[] seen = new String[32];
    private final int[] seenIndex = new int[32];
    private int nseen;

    private int index(String name) {
        for (int i = 0; i < names.length; i++) if (names[i] == name) return i;   // the callers' constant names: one compare each
        for (int i = 0; i < nseen; i++) if (seen[i] == name) return seenIndex[i];
        for (int i = 0; i < names.length; i++) {
            if (names[i].equals(name)) {
                if (nseen < seen.length) {
                    seen[nseen] = name;
                    seenIndex[nseen++] = i;
                }
                return i;
            }
        }
        if (arch == Arch.ARM64) {
            String alias = switch (name.toLowerCase(java.util.Locale.ROOT)) {
                case "lr" -> "x30";
                case "fp" -> "x29";
                default -> null;
            };
            if (alias != null) return index(alias);
        }
        throw new IllegalStateException("register " + name + " is not recorded at a hit");
    }

    @Override public Arch arch() { return arch; }

    @Override public String ipName() { return arch == Arch.X86_64 ? "rip" : "pc"; }

    @Override public String spName() { return arch == Arch.X86_64 ? "rsp" : "sp"; }

    @Override public long origAx() { return arch == Arch.X86_64 ? 0 : -1; }

    @Override public Entry entry() { return entry; }

    @Override public long ip() { return record.register(ip); }

    @Override public long sp() { return record.register(sp); }

    @Override public long returnValue() { return record.register(ret); }

    @Override
    public long arg(int n) {
        if (arch == Arch.ARM64 && n >= 8) return 0;      // as regs_get_kernel_argument on arm64
        if (n < 0 || n >= args.length) throw new IllegalStateException("argument " + n + " is not recorded at a hit");
        return record.register(args[n]);
    }

    @Override public long get(String name) { return record.register(index(name)); }

    @Override public List<String> names() { return listed; }

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
