package dev.kpemu.kprobes;

import java.util.List;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.machine.RecordedProbeHits;

/**
 * The registers of a recorded hit ({@link RecordedHit}) as the live view shows them there, from the
 * values read at the hit. x86-64 (an ftrace site): what {@link FtraceRegs} shows (orig_ax 0, the
 * ip past the {@code int3}). arm64 (a BRK): pt_regs as the breakpoint left it (the pc at the
 * probe, arguments x0–x7). Names, the ip's and sp's names and aliases ({@code lr}, {@code fp})
 * are the live view's: a name is found by the engine register it stands for. Only the registers
 * captured ({@code names}); asking for another, writing one or walking memory is a defect of the
 * handler that said it was recordable, and fails.
 */
final class RecordedRegs implements Regs {
    private final LiveRegs live;
    private final String[] names;
    /** The engine register of each of {@link #names}. */
    private final int[] ids;
    private final Entry entry;
    private final int ip, sp, ret;
    private final int[] args;
    private RecordedProbeHits.Record record;

    /**
     * @param live the arch's live view, whose names and engine registers these are
     * @param names the registers each record holds, in its order
     * @param ids their engine registers ({@link LiveRegs#engineIdOf})
     * @param entry how the recorded hits' handlers are entered ({@link ArchKprobes#recordedEntry})
     */
    RecordedRegs(LiveRegs live, String[] names, int[] ids, Entry entry) {
        this.live = live;
        this.names = names.clone();
        this.ids = ids.clone();
        this.entry = entry;
        this.ip = index(live.ipName());
        this.sp = index(live.spName());
        // the calling convention: return value and argument registers (regs_get_kernel_argument)
        String[] argNames = live.arch() == Arch.X86_64 ? new String[] {"rdi", "rsi", "rdx", "rcx", "r8", "r9"}
                : new String[] {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"};
        this.ret = index(live.arch() == Arch.X86_64 ? "rax" : "x0");
        this.args = new int[argNames.length];
        for (int i = 0; i < argNames.length; i++) args[i] = index(argNames[i]);
    }

    void at(RecordedProbeHits.Record r) {
        this.record = r;
        this.returnIp = 0;
    }

    /** A kretprobe return's record: the registers at the trampoline as the live view shows them to its handler, the ip {@code realIp}. */
    void atReturn(RecordedProbeHits.Record r, long realIp) {
        this.record = r;
        this.returnIp = realIp;
    }

    /** A return's real return address (0: an entry's record). */
    private long returnIp;

    /** Names asked for before that are other String objects than {@link #names}' (a probe's parsed %x0, an alias), and their index. */
    private final String[] seen = new String[32];
    private final int[] seenIndex = new int[32];
    private int nseen;

    /** Where register {@code name} is in each record; IllegalStateException when it is not recorded. */
    int indexOf(String name) { return index(name); }

    private int index(String name) {
        for (int i = 0; i < names.length; i++) if (names[i] == name) return i;   // the callers' constant names: one compare each
        for (int i = 0; i < nseen; i++) if (seen[i] == name) return seenIndex[i];
        int id;
        try {
            id = live.engineIdOf(name);
        } catch (IllegalArgumentException e) {
            throw new IllegalStateException("register " + name + " is not recorded at a hit", e);
        }
        for (int i = 0; i < ids.length; i++) {
            if (ids[i] != id) continue;
            if (nseen < seen.length) {
                seen[nseen] = name;
                seenIndex[nseen++] = i;
            }
            return i;
        }
        throw new IllegalStateException("register " + name + " is not recorded at a hit");
    }

    @Override public Arch arch() { return live.arch(); }

    @Override public String ipName() { return live.ipName(); }

    @Override public String spName() { return live.spName(); }

    /** An ftrace site's view has orig_ax 0 ({@link FtraceRegs}); a breakpoint's pt_regs -1, as the live view's. */
    @Override public long origAx() { return entry() == Entry.FTRACE ? 0 : -1; }

    /** An entry's as the arch records them; a return's the trampoline's breakpoint. */
    @Override public Entry entry() { return returnIp != 0 ? Entry.BREAKPOINT : entry; }

    @Override public long ip() { return returnIp != 0 ? returnIp : record.register(ip); }

    /** Register {@code i} of the record, as this view shows it (a return's ip: the real return address). */
    long register(int i) { return returnIp != 0 && i == ip ? returnIp : record.register(i); }

    @Override public long sp() { return record.register(sp); }

    @Override public long returnValue() { return record.register(ret); }

    @Override
    public long arg(int n) {
        if (n >= 0 && n < args.length) return record.register(args[n]);
        if (n >= args.length && live.arch() == Arch.ARM64) return 0;     // as regs_get_kernel_argument on arm64
        throw new IllegalStateException("argument " + n + " is not recorded at a hit");   // x86-64: on the stack
    }

    @Override public long get(String name) { return register(index(name)); }

    @Override public List<String> names() { return live.names(); }

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
