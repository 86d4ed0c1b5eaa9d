package dev.kpemu.kprobes.events;

import dev.kpemu.image.btf.Btf;
import dev.kpemu.image.btf.BtfType;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.RecordedProbeHits;

import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * Where a booted kernel keeps the state ftrace's latency column is made of, from its BTF and
 * kallsyms, and reading it at a probe hit ({@link #state}); with the kernel's path costs
 * ({@link LatencyPaths}) it gives the column Linux prints ({@link #column}).
 *
 * <ul>
 * <li>x86-64: {@code preempt_count} is per-CPU, {@code GS_BASE + offset}: 6.2 to 6.14 in
 *     {@code struct pcpu_hot} (member {@code preempt_count}, beside {@code current_task}), else
 *     the per-CPU {@code int __preempt_count} (its offset from {@code current_task}'s is the
 *     difference of their places in the BTF's {@code .data..percpu}, or its kallsyms address);
 *     read as {@code current_task} is ({@link TaskLayout}: GS-relative, or at its absolute address
 *     when that lies outside the per-CPU section, as 7.x's cache-hot variables do). Its bit 31 is the folded,
 *     inverted PREEMPT_NEED_RESCHED ({@code test_preempt_need_resched}: bit clear).</li>
 * <li>arm64: {@code current_thread_info()->preempt_count} ({@code task_struct.thread_info}, at
 *     SP_EL0): the low 32 bits the count, the high 32 {@code preempt.need_resched}, 0 when a
 *     reschedule is needed.</li>
 * <li>Both: {@code task_struct.thread_info.flags} (TIF_NEED_RESCHED, TIF_NEED_RESCHED_LAZY) and
 *     {@code task_struct.migration_disabled}. The TIF bit numbers are the architectures' ABI:
 *     x86-64 TIF_NEED_RESCHED 3 before the generic TIF bits, 4 and 5 (lazy) with them
 *     ({@code include/asm-generic/thread_info_tif.h}, the 7.x kernels); arm64 TIF_NEED_RESCHED 1
 *     and, with lazy preemption (7.x), TIF_NEED_RESCHED_LAZY 2.</li>
 * </ul>
 */
public final class LatencyLayout {
    private final Arch arch;
    private final long x86PreemptGsOffset;       // x86: offset from GS_BASE of preempt_count
    private final boolean gsRelative;            // x86: false when current_task is read as a plain global (TaskLayout's rule)
    private final long preemptOffset;            // arm64: task_struct.thread_info.preempt_count, -1 when unknown
    private final long tiFlagsOffset, migrationOffset;
    private final int needReschedBit, lazyBit;   // lazyBit -1: no TIF_NEED_RESCHED_LAZY
    private final KernelSymbols symbols;
    private final boolean preemption, fprobeOnFgraph;
    private final boolean kretprobeBreakpoint;
    private final byte[] word = new byte[8];

    private LatencyLayout(Arch arch, long x86PreemptGsOffset, boolean gsRelative, long preemptOffset, long tiFlagsOffset, long migrationOffset,
                          int needReschedBit, int lazyBit, KernelSymbols symbols) {
        this.arch = arch;
        this.x86PreemptGsOffset = x86PreemptGsOffset;
        this.gsRelative = gsRelative;
        this.preemptOffset = preemptOffset;
        this.tiFlagsOffset = tiFlagsOffset;
        this.migrationOffset = migrationOffset;
        this.needReschedBit = needReschedBit;
        this.lazyBit = lazyBit;
        this.symbols = symbols;
        this.preemption = symbols.lookupName("preempt_schedule").isPresent();
        this.fprobeOnFgraph = symbols.lookupName("fprobe_fgraph_entry").isPresent();
        // arm64 6.12 and later: __kretprobe_trampoline is a BRK whose hook is kretprobe_brk_handler
        // (6.1's trampoline saves the registers and calls trampoline_probe_handler). The kernel's
        // text cannot tell: kpemu puts its own trampoline there.
        this.kretprobeBreakpoint = arch == Arch.ARM64 && symbols.lookupName("kretprobe_brk_handler").isPresent();
    }

    /**
     * The layout of the kernel {@code k} describes, or null when its BTF lacks what is needed
     * (then only the interrupt state is known: the old column).
     *
     * @param genericTifBits whether the kernel uses the generic TIF bit numbers (the 7.x kernels)
     */
    public static LatencyLayout of(KernelStructs k, KernelSymbols symbols, boolean genericTifBits) {
        Btf btf = k.btf();
        BtfType task = k.taskStruct();
        try {
            long tiFlags = btf.offsetOf(task, "thread_info.flags").offset();
            long migration = btf.member(task, "migration_disabled").map(Btf.Field::offset).orElse(-1L);
            boolean lazy = genericTifBits;   // the 7.x kernels select ARCH_HAS_PREEMPT_LAZY on both arches
            if (k.arch() == Arch.X86_64) {
                KernelStructs.CurrentTask cur = k.currentTask();
                OptionalLong gs = x86PreemptGsOffset(btf, cur, symbols);   // 7.x: a kernel-half link address
                if (gs.isEmpty()) return null;
                return new LatencyLayout(Arch.X86_64, gs.getAsLong(), cur.gsRelative(), -1, tiFlags, migration, genericTifBits ? 4 : 3,
                        lazy ? 5 : -1, symbols);
            }
            long preempt = btf.offsetOf(task, "thread_info.preempt_count").offset();
            // arm64 keeps its own TIF numbers: TIF_NEED_RESCHED 1, and from 6.13 TIF_NEED_RESCHED_LAZY 2
            return new LatencyLayout(Arch.ARM64, -1, false, preempt, tiFlags, migration, 1, lazy ? 2 : -1, symbols);
        } catch (NoSuchElementException | IllegalArgumentException e) {
            return null;
        }
    }

    private static OptionalLong x86PreemptGsOffset(Btf btf, KernelStructs.CurrentTask cur, KernelSymbols symbols) {
        if (cur.symbol().equals("pcpu_hot")) {
            Optional<BtfType> hot = btf.structByName("pcpu_hot");
            Optional<Btf.Field> m = hot.flatMap(h -> btf.member(h, "preempt_count"));
            return m.isPresent() ? OptionalLong.of(cur.perCpuOffset() + m.get().offset()) : OptionalLong.empty();
        }
        Optional<Btf.VarLocation> task = btf.variable(cur.symbol()).filter(v -> v.section().equals(".data..percpu"));
        Optional<Btf.VarLocation> pc = btf.variable("__preempt_count").filter(v -> v.section().equals(".data..percpu"));
        if (task.isPresent() && pc.isPresent()) return OptionalLong.of(cur.perCpuOffset() - task.get().offset() + pc.get().offset());
        // a cache-hot per-CPU variable (6.15+) the BTF's DATASEC does not place: kallsyms' address,
        // which is GS-relative as current_task's is
        return symbols.lookupName("__preempt_count");
    }

    /** Whether the kernel's fprobes are built on fgraph ({@link LatencyPaths.Kernel#fprobeOnFgraph}). */
    public boolean fprobeOnFgraph() { return fprobeOnFgraph; }

    /** The kernel's path costs. */
    public LatencyPaths.Kernel kernel() {
        LatencyPaths.Kernel k = kernel;
        if (k == null) kernel = k = new LatencyPaths.Kernel(arch, preemption, fprobeOnFgraph, kretprobeBreakpoint);
        return k;
    }

    /** {@link #kernel()}, made once (every event's column asks for it). */
    private LatencyPaths.Kernel kernel;

    /**
     * The probed code's state at the hit: interrupts from the trapped registers, the rest from
     * the current task and (x86-64) the per-CPU area; null when the current task is unknown.
     */
    public LatencyFlags.State state(MachineFetchContext ctx, Machine machine) {
        long task = ctx.currentTask();
        if (task == 0) return null;
        int count;
        boolean preemptNeedResched;
        if (arch == Arch.X86_64) {
            long gs = gsRelative ? ctx.gsBase() : 0;
            int raw = (int) ctx.kernelValue(gs + x86PreemptGsOffset, 4);
            if (!ctx.valueRead()) return null;
            count = raw & 0x7fffffff;
            preemptNeedResched = (raw & 0x80000000) == 0;
        } else {
            long raw = ctx.kernelValue(task + preemptOffset, 8);
            if (!ctx.valueRead()) return null;
            count = (int) raw;
            preemptNeedResched = (raw >>> 32) == 0;
        }
        long tif = ctx.kernelValue(task + tiFlagsOffset, 8);   // 0 when unreadable
        int migration = migrationOffset >= 0 && ctx.readKernel(task + migrationOffset, word, 0, 2) ? (int) le(word, 2) : 0;
        return new LatencyFlags.State(ctx.irqsDisabled(), count, (tif >>> needReschedBit & 1) != 0,
                lazyBit >= 0 && (tif >>> lazyBit & 1) != 0, preemptNeedResched, migration);
    }

    /**
     * The guest words {@link #state} reads besides the current task, for a hit recorded natively to
     * capture ({@link dev.kpemu.kprobes.RecordedHit}): the preempt count (x86-64 per CPU, arm64 the
     * task's thread_info word), the task's TIF flags and its migration_disabled.
     */
    java.util.List<RecordedProbeHits.Word> recordedWords() {
        var l = new java.util.ArrayList<RecordedProbeHits.Word>();
        if (arch == Arch.X86_64) {
            l.add(new RecordedProbeHits.Word(gsRelative ? RecordedProbeHits.Base.GS_BASE : RecordedProbeHits.Base.ABSOLUTE, x86PreemptGsOffset, 4));
        } else {
            l.add(new RecordedProbeHits.Word(RecordedProbeHits.Base.TASK, preemptOffset, 8));
        }
        l.add(new RecordedProbeHits.Word(RecordedProbeHits.Base.TASK, tiFlagsOffset, 8));
        if (migrationOffset >= 0) l.add(new RecordedProbeHits.Word(RecordedProbeHits.Base.TASK, migrationOffset, 2));
        return l;
    }

    /** The column Linux prints for an event fired by {@code path} now, or null when the guest state cannot be read. */
    public String column(MachineFetchContext ctx, Machine machine, LatencyPaths.Path path, int ftraceOps) {
        LatencyFlags.State s = state(ctx, machine);
        if (s == null) return null;
        return LatencyFlags.column(LatencyPaths.traceContext(kernel(), path, s, ftraceOps));
    }

    /**
     * The column of a uprobe event: Linux fires it from {@code uprobe_notify_resume} on the way
     * back to user mode (the breakpoint only sets TIF_UPROBE), in the task's context with
     * interrupts on and a preempt count of 0, and {@code trace_event_buffer_reserve}'s
     * {@code tracing_gen_ctx_dec} then takes one off the word with CONFIG_PREEMPTION: on such a
     * kernel the decrement borrows through the count into the flags (all set when none was, the
     * recorded x86-64 {@code DNZff}). arm64 with CONFIG_PREEMPTION (7.x, lazy preemption) records
     * its uprobe events with one preemption level held: Linux 7.2 under QEMU prints {@code .....}
     * and {@code .l...} there, and kprobes recorded beside them show {@code uprobe_notify_resume}
     * and {@code find_active_uprobe_rcu} entered with interrupts off, the event with them on (the
     * level's origin on arm64's way to the handler is not identified; 6.13 to 6.19 are unrecorded).
     * {@code task} is the task that hit; its TIF bits and migration_disabled are read, the
     * per-CPU PREEMPT_NEED_RESCHED (x86-64) is taken as clear.
     */
    public String userColumn(MachineFetchContext ctx, long task) {
        long tif = ctx.kernelValue(task + tiFlagsOffset, 8);
        int migration = migrationOffset >= 0 && ctx.readKernel(task + migrationOffset, word, 0, 2) ? (int) le(word, 2) : 0;
        boolean needResched = (tif >>> needReschedBit & 1) != 0;
        int held = arch == Arch.ARM64 && kernel().preemption() ? 1 : 0;
        LatencyFlags.State s = new LatencyFlags.State(false, held, needResched, lazyBit >= 0 && (tif >>> lazyBit & 1) != 0,
                arch == Arch.ARM64 && needResched, migration);
        int word = LatencyFlags.traceContext(s, kernel().preemption());
        // before lazy preemption (6.13) flag 0x02 was IRQS_NOSUPPORT: a borrow sets it, the column does not show it as lazy
        if (lazyBit < 0) word &= ~(LatencyFlags.NEED_RESCHED_LAZY << 16);
        return LatencyFlags.column(word);
    }

    private static long le(byte[] b, int n) {
        long v = 0;
        for (int i = n - 1; i >= 0; i--) v = (v << 8) | (b[i] & 0xff);
        return v;
    }
}
