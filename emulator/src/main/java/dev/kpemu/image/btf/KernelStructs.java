package dev.kpemu.image.btf;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.Symbol;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;

/**
 * What the event engine needs to know about the guest kernel's structures, all taken from the
 * kernel's own BTF (never hard-coded per version): where {@code current} is, and the offsets of
 * {@code task_struct.comm}, {@code .pid}, {@code .tgid} and of {@code struct pt_regs} members.
 *
 * <p>{@code current}:
 * <ul>
 * <li>x86-64: a per-CPU variable read through the GS base ({@code mov %gs:OFF, %reg}). Kernels
 *     from 6.2 on (and backports) keep it in {@code struct pcpu_hot pcpu_hot} (member
 *     {@code current_task}); older ones in the per-CPU pointer {@code current_task}. The per-CPU
 *     offset comes from kallsyms (the per-CPU symbols are absolute with
 *     CONFIG_KALLSYMS_ABSOLUTE_PERCPU; since 6.15 the section is linked in place and GS_BASE is added
 *     to the variable's link address, which kallsyms holds) and, failing that, from the BTF DATASEC
 *     {@code .data..percpu}, which pahole fills with the per-CPU variables (x86-64 links that
 *     section at 0, so the offset inside it is the per-CPU address). The task pointer is the 8
 *     bytes at {@code GS_BASE + }{@link CurrentTask#gsOffset()}. A uniprocessor kernel
 *     (CONFIG_SMP off, as {@code make tinyconfig} builds) has no per-CPU areas: its per-CPU
 *     variables are ordinary globals in {@code .data}, read without a segment prefix, so the
 *     variable's kallsyms address, outside {@code [__per_cpu_start, __per_cpu_end)}, is where
 *     the task pointer is ({@link CurrentTaskSource#X86_GLOBAL}).</li>
 * <li>arm64: the task pointer is in SP_EL0 while in the kernel; nothing to look up.</li>
 * </ul>
 */
public final class KernelStructs {
    /** TASK_COMM_LEN. */
    public static final int TASK_COMM_LEN = 16;

    public enum CurrentTaskSource {
        /** x86-64: the task pointer is at GS_BASE + gsOffset. */
        X86_PERCPU,
        /** x86-64 uniprocessor kernel: the task pointer is at the absolute address gsOffset (no GS). */
        X86_GLOBAL,
        /** arm64: the task pointer is SP_EL0. */
        ARM64_SP_EL0
    }

    /**
     * How to find the current task.
     *
     * @param symbol        x86: the per-CPU variable ({@code pcpu_hot} or {@code current_task}); arm64: empty
     * @param perCpuOffset  x86: the variable's per-CPU offset (its absolute kallsyms address)
     * @param memberOffset  x86: offset of the task pointer inside the variable (0 for {@code current_task})
     * @param detail        where the numbers came from
     */
    public record CurrentTask(CurrentTaskSource source, String symbol, long perCpuOffset, long memberOffset, String detail) {
        /** x86: offset from GS_BASE of the {@code struct task_struct *}. */
        public long gsOffset() { return perCpuOffset + memberOffset; }

        /** x86: whether the task pointer is GS-relative (false: a uniprocessor kernel's global, at {@link #gsOffset()}). */
        public boolean gsRelative() { return source == CurrentTaskSource.X86_PERCPU; }

        @Override public String toString() {
            if (source == CurrentTaskSource.X86_GLOBAL) {
                return String.format("current = *(u64 *)0x%x [%s%s] (%s)", gsOffset(), symbol,
                        memberOffset == 0 ? "" : String.format(" + 0x%x", memberOffset), detail);
            }
            return source == CurrentTaskSource.ARM64_SP_EL0 ? "current = SP_EL0"
                    : String.format("current = *(u64 *)(GS_BASE + 0x%x) [%s%s] (%s)", gsOffset(), symbol,
                    memberOffset == 0 ? "" : String.format(" + 0x%x", memberOffset), detail);
        }
    }

    private final Btf btf;
    private final Arch arch;
    private final BtfType taskStruct;
    private final Btf.Field comm, pid, tgid;
    private final CurrentTask current;
    private final Map<String, Long> ptRegs;
    private final long ptRegsSize;

    private KernelStructs(Btf btf, Arch arch, BtfType taskStruct, Btf.Field comm, Btf.Field pid, Btf.Field tgid,
                          CurrentTask current, Map<String, Long> ptRegs, long ptRegsSize) {
        this.btf = btf; this.arch = arch; this.taskStruct = taskStruct; this.comm = comm; this.pid = pid; this.tgid = tgid;
        this.current = current; this.ptRegs = ptRegs; this.ptRegsSize = ptRegsSize;
    }

    /** For Debian's kernel of this architecture (BTF located by {@link BtfLocator#forGuest}, symbols from kallsyms). */
    public static KernelStructs forGuest(GuestImages images, Arch arch) throws KernelImageException {
        SymbolTable syms = images.symbols(arch);
        return of(BtfLocator.forGuest(images, arch, syms).btf(), syms, arch);
    }

    /**
     * Computes the facts from a kernel's BTF; {@code symbols} (may be null) supplies x86-64's
     * per-CPU offsets, else the BTF's {@code .data..percpu} DATASEC does.
     */
    public static KernelStructs of(Btf btf, SymbolTable symbols, Arch arch) throws BtfFormatException {
        BtfType task = btf.structByName("task_struct")
                .orElseThrow(() -> new BtfFormatException(btf.source() + ": no struct task_struct in the BTF"));
        Btf.Field comm = require(btf, task, "comm");
        BtfType commType = btf.resolve(comm.typeId());
        if (commType == null || commType.kind() != BtfKind.ARRAY || comm.size() != TASK_COMM_LEN
                || btf.sizeOf(commType.array().elemType()) != 1) {
            throw new BtfFormatException(btf.source() + ": task_struct.comm is " + btf.typeName(comm.typeId()) + ", expected char[" + TASK_COMM_LEN + "]");
        }
        Btf.Field pid = require(btf, task, "pid"), tgid = require(btf, task, "tgid");
        for (Btf.Field f : new Btf.Field[]{pid, tgid}) {
            if (f.size() != 4 || f.bitfield()) throw new BtfFormatException(btf.source() + ": task_struct." + f.path() + " is " + btf.typeName(f.typeId()) + " (" + f.size() + " bytes), expected a 4-byte pid_t");
        }
        CurrentTask current = arch == Arch.ARM64
                ? new CurrentTask(CurrentTaskSource.ARM64_SP_EL0, "", 0, 0, "SP_EL0 holds current in the kernel")
                : x86Current(btf, symbols);

        Map<String, Long> regs = new LinkedHashMap<>();
        long regsSize = 0;
        Optional<BtfType> pr = btf.structByName("pt_regs");
        if (pr.isPresent()) {
            flatten(btf, pr.get(), 0, regs, 0);
            regsSize = pr.get().size();
        }
        return new KernelStructs(btf, arch, task, comm, pid, tgid, current, Collections.unmodifiableMap(regs), regsSize);
    }

    private static Btf.Field require(Btf btf, BtfType struct, String member) throws BtfFormatException {
        return btf.member(struct, member).orElseThrow(() ->
                new BtfFormatException(btf.source() + ": struct " + struct.name() + " has no member '" + member + "'"));
    }

    private static CurrentTask x86Current(Btf btf, SymbolTable symbols) throws BtfFormatException {
        Optional<BtfType> hot = btf.structByName("pcpu_hot");
        if (hot.isPresent()) {
            Optional<Btf.Field> m = btf.member(hot.get(), "current_task");
            if (m.isPresent()) {
                Optional<long[]> where = perCpu(btf, symbols, "pcpu_hot");
                if (where.isPresent() && uniprocessorGlobal(symbols, where.get())) {
                    return new CurrentTask(CurrentTaskSource.X86_GLOBAL, "pcpu_hot", where.get()[0], m.get().offset(),
                            "uniprocessor kernel: pcpu_hot is a global outside the per-CPU section; struct pcpu_hot.current_task at +"
                                    + m.get().offset() + " from BTF");
                }
                if (where.isPresent()) {
                    return new CurrentTask(CurrentTaskSource.X86_PERCPU, "pcpu_hot", where.get()[0], m.get().offset(),
                            source(where.get()) + "; struct pcpu_hot.current_task at +" + m.get().offset() + " from BTF");
                }
            }
        }
        Optional<long[]> where = perCpu(btf, symbols, "current_task");
        if (where.isPresent() && uniprocessorGlobal(symbols, where.get())) {
            return new CurrentTask(CurrentTaskSource.X86_GLOBAL, "current_task", where.get()[0], 0,
                    "uniprocessor kernel: current_task is a global outside the per-CPU section");
        }
        if (where.isPresent()) {
            return new CurrentTask(CurrentTaskSource.X86_PERCPU, "current_task", where.get()[0], 0,
                    source(where.get()) + "; no struct pcpu_hot in this kernel");
        }
        throw new BtfFormatException(btf.source() + ": cannot locate x86-64 current: neither pcpu_hot nor current_task is in kallsyms or the BTF's .data..percpu");
    }

    /**
     * Whether a per-CPU variable found in kallsyms is a uniprocessor kernel's ordinary global: a
     * kernel-half address outside {@code [__per_cpu_start, __per_cpu_end)} (an SMP kernel's is a
     * small absolute offset, or, since 6.15, inside that section).
     */
    private static boolean uniprocessorGlobal(SymbolTable symbols, long[] where) {
        if (symbols == null || (where[1] & 1) == 0 || where[0] >= 0) return false;   // not from kallsyms, or not a kernel address
        Optional<Symbol> start = symbols.byName("__per_cpu_start"), end = symbols.byName("__per_cpu_end");
        if (start.isEmpty() || end.isEmpty()) return false;
        long a = where[0];
        return Long.compareUnsigned(a, start.get().address()) < 0 || Long.compareUnsigned(a, end.get().address()) >= 0;
    }

    private static String source(long[] w) {
        return switch ((int) w[1]) {
            case 3 -> "per-CPU offset from kallsyms, matching the BTF .data..percpu DATASEC";
            case 1 -> "per-CPU offset from kallsyms (not in the BTF DATASEC)";
            default -> "per-CPU offset from the BTF .data..percpu DATASEC (not in kallsyms)";
        };
    }

    /** {offset, sources bitmask: 1 kallsyms, 2 BTF}. Throws when both have it and they disagree. */
    private static Optional<long[]> perCpu(Btf btf, SymbolTable symbols, String name) throws BtfFormatException {
        Optional<Symbol> sym = symbols == null ? Optional.empty() : symbols.byName(name);
        Optional<Btf.VarLocation> var = btf.variable(name).filter(v -> v.section().equals(".data..percpu"));
        // kernels whose per-CPU section is linked at its place in the image (x86-64 since 6.15)
        // address per-CPU variables as GS_BASE + their link address: kallsyms holds that address,
        // the DATASEC the offset from __per_cpu_start
        long sectionBase = symbols == null ? 0 : symbols.byName("__per_cpu_start").map(Symbol::address).orElse(0L);
        if (sym.isPresent() && var.isPresent() && sym.get().address() != var.get().offset()
                && sym.get().address() != sectionBase + var.get().offset()) {
            throw new BtfFormatException(String.format("%s: per-CPU %s: kallsyms says 0x%x, the BTF .data..percpu DATASEC says 0x%x",
                    btf.source(), name, sym.get().address(), var.get().offset()));
        }
        if (sym.isPresent()) return Optional.of(new long[]{sym.get().address(), var.isPresent() ? 3 : 1});
        return var.map(v -> new long[]{v.offset(), 2});
    }

    /** Members of pt_regs by name, including those inside anonymous unions/structs (arm64's regs/sp/pc/pstate). */
    private static void flatten(Btf btf, BtfType c, long baseBits, Map<String, Long> out, int depth) {
        if (depth > 8) return;
        for (BtfType.Member m : c.members()) {
            long bits = baseBits + m.bitOffset();
            if (m.anonymous()) {
                BtfType inner = btf.resolve(m.typeId());
                if (inner != null && inner.kind().isComposite()) flatten(btf, inner, bits, out, depth + 1);
            } else {
                out.putIfAbsent(m.name(), bits >>> 3);
            }
        }
    }

    public Btf btf() { return btf; }
    public Arch arch() { return arch; }
    public BtfType taskStruct() { return taskStruct; }
    public long taskStructSize() { return taskStruct.size(); }

    /** Byte offset of {@code task_struct.comm}. */
    public long commOffset() { return comm.offset(); }
    /** Length of {@code comm} (TASK_COMM_LEN, 16; checked against the BTF). */
    public int commLength() { return (int) comm.size(); }
    /** Byte offset of {@code task_struct.pid} (a 4-byte pid_t; the thread id). */
    public long pidOffset() { return pid.offset(); }
    /** Byte offset of {@code task_struct.tgid} (a 4-byte pid_t; the process id). */
    public long tgidOffset() { return tgid.offset(); }
    public Btf.Field comm() { return comm; }
    public Btf.Field pid() { return pid; }
    public Btf.Field tgid() { return tgid; }

    /** How to find the current task on this architecture. */
    public CurrentTask currentTask() { return current; }

    /** {@code struct pt_regs} member offsets (bytes), including members of anonymous unions/structs. */
    public Map<String, Long> ptRegs() { return ptRegs; }
    public long ptRegsSize() { return ptRegsSize; }

    /** Byte offset of a pt_regs member path ({@code di}, {@code ip}, arm64 {@code regs[3]}, {@code pc}). */
    public long ptRegsOffset(String path) {
        if (btf.structByName("pt_regs").isEmpty()) throw new NoSuchElementException("no struct pt_regs in " + btf.source());
        return btf.offsetOf("pt_regs", path).offset();
    }

    /** Any other task_struct member path. */
    public Btf.Field task(String path) { return btf.offsetOf(taskStruct, path); }

    @Override
    public String toString() {
        return String.format("%s: task_struct (%d bytes) comm @0x%x[%d] pid @0x%x tgid @0x%x; %s; pt_regs %d bytes",
                arch.linuxName(), taskStructSize(), commOffset(), commLength(), pidOffset(), tgidOffset(), current, ptRegsSize);
    }
}
