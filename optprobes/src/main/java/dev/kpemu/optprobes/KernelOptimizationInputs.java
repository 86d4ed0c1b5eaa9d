package dev.kpemu.optprobes;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.NavigableSet;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;

import dev.kpemu.image.Symbol;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;

/**
 * {@link OptimizationInputs} read from a real Linux 6.1 kernel: the tables are parsed from the
 * kernel <em>file</em> (the bytes {@link SymbolTable#fileOffset} indexes), because the kernel frees
 * {@code __mcount_loc} with its init memory and sorts {@code __jump_table} in place (moving entries
 * whose fields are relative to their own address) before any probe is registered.
 *
 * <h2>x86-64 (Debian's 6.1, {@code CONFIG_KALLSYMS_ALL=y}: every table has its bounds in kallsyms)</h2>
 * <ul>
 * <li>exception table {@code __start___ex_table..__stop___ex_table}: {@code struct
 *     exception_table_entry {int insn, fixup, data;}}, 12 bytes, {@code insn} relative to itself;</li>
 * <li>ftrace sites {@code __start_mcount_loc..__stop_mcount_loc}: 8-byte absolute addresses;</li>
 * <li>reserved text: jump labels {@code __start___jump_table..__stop___jump_table} ({@code struct
 *     jump_entry {s32 code; s32 target; long key;}}, 16 bytes, 5 bytes reserved at {@code code} —
 *     the longest form), static calls {@code __start_static_call_sites..__stop_static_call_sites}
 *     ({@code struct static_call_site {s32 addr; s32 key;}}, the 5-byte call). Not alternatives:
 *     Linux's {@code alternatives_text_reserved} covers only the {@code lock} prefixes of
 *     {@code .smp_locks}, and only of a kernel patched for one CPU that may later get more
 *     ({@code alternatives_smp_module_add} keeps none when one CPU is possible, and none is patched
 *     with several present) — never the case on kpemu's boards, nor under QEMU with {@code -smp N}.
 *     Recorded: Linux optimizes regions holding alternative sites and lock prefixes
 *     ({@code reference/x86_64/SERIES/optimized.error_log}, {@code OptimizedSitesTest});</li>
 * <li>the retpoline thunks {@code __indirect_thunk_start..__indirect_thunk_end} (a direct jump there
 *     is an indirect jump, as Linux 6.1's {@code insn_is_indirect_jump} says);</li>
 * <li>the patch window: {@link OptimizationInputs#kernelPatchWindow} with the idle functions.</li>
 * </ul>
 *
 * <h2>arm64 (Debian's 6.1 has no {@code CONFIG_KALLSYMS_ALL}: kallsyms holds text symbols only)</h2>
 * The Image has no section headers and kallsyms does not bound {@code __ex_table},
 * {@code __patchable_function_entries} or {@code __jump_table}, so:
 * <ul>
 * <li>exception table: <b>not read</b> (empty). kpemu's arm64 rule only needs it at the probed
 *     instruction itself (a one-instruction region; see {@link OptimizationSafety}), and Linux
 *     refuses to kprobe such an instruction at all; the optimizer also maps a fault in a detour copy
 *     back to the original address. Documented gap: a probe on a uaccess instruction is not refused.</li>
 * <li>ftrace sites: derived from the code — every text symbol's first two instructions after an
 *     optional landing pad ({@code bti c}, {@code paciasp}, {@code pacibsp}) when they are the
 *     {@code -fpatchable-function-entry=2} pair (NOP/{@code mov x9, x30} then NOP/{@code bl}).</li>
 * <li>reserved text: {@code __jump_table} and {@code .static_call_sites} cannot be bounded. A
 *     jump-label site is a {@code nop} or a {@code b} that the kernel rewrites when its key flips
 *     (Linux refuses any kprobe there: {@code jump_label_text_reserved}), so every {@code nop} and
 *     unconditional {@code b} of a candidate function (read from the file) is reserved —
 *     conservative: ordinary branches and alignment NOPs are refused too. Breakpoint probes keep the
 *     gap (kpemu's engine does not know the sites either).</li>
 * <li>BTI: the kernel is built with {@code CONFIG_ARM64_BTI_KERNEL}, so landing pads are refused.</li>
 * </ul>
 */
public final class KernelOptimizationInputs implements OptimizationInputs {
    /** Functions the idle loop waits in, by arch: a vCPU there has no interrupted kernel context. */
    static final List<String> X86_IDLE = List.of("default_idle", "arch_cpu_idle", "default_idle_call", "cpu_idle_poll",
            "native_safe_halt", "pv_native_safe_halt", "acpi_safe_halt", "mwait_idle");
    static final List<String> ARM64_IDLE = List.of("cpu_do_idle", "arch_cpu_idle", "default_idle_call", "cpu_idle_poll");
    /**
     * Entries of the kernel's return-to-user paths: reached only from the top of a task's kernel
     * stack (a syscall or an exception or interrupt taken in user mode is being left), so no
     * interrupted kernel context exists there. x86: the C syscall exit and the interrupt/exception
     * return; arm64: {@code ret_to_user} (every return to EL0 from an EL0 exception).
     */
    static final List<String> X86_RETURN_TO_USER = List.of("syscall_exit_to_user_mode", "swapgs_restore_regs_and_return_to_usermode");
    static final List<String> ARM64_RETURN_TO_USER = List.of("ret_to_user");

    private final Arch arch;
    private final NavigableSet<Long> exceptionTable;
    private final NavigableSet<Long> ftraceSites;
    private final List<TextRange> reserved;
    /** Indices into {@link #reserved} by range start (unsigned): a function's overlaps without a scan of every range. */
    private final java.util.NavigableMap<Long, List<Integer>> reservedByStart = new java.util.TreeMap<>(Long::compareUnsigned);
    private final long longestReserved;
    private final List<TextRange> idle;
    private final TextRange thunks;
    private final List<Long> returnToUser;
    private final boolean bti;
    /** Reserved text found per function by scanning its code (arm64), or null where the tables were read (x86). */
    private final java.util.function.Function<TextRange, List<TextRange>> functionScan;
    private final List<String> notes;
    private final boolean groupFormsBoostable;

    KernelOptimizationInputs(Arch arch, NavigableSet<Long> ex, NavigableSet<Long> ftrace, List<TextRange> reserved,
                                     List<TextRange> idle, List<Long> returnToUser, TextRange thunks, boolean bti, List<String> notes,
                                     java.util.function.Function<TextRange, List<TextRange>> functionScan) {
        this.functionScan = functionScan;
        this.arch = arch;
        this.exceptionTable = Collections.unmodifiableNavigableSet(ex);
        this.ftraceSites = Collections.unmodifiableNavigableSet(ftrace);
        this.reserved = List.copyOf(reserved);
        long longest = 0;
        for (int i = 0; i < this.reserved.size(); i++) {
            TextRange r = this.reserved.get(i);
            reservedByStart.computeIfAbsent(r.start(), k -> new ArrayList<>()).add(i);
            longest = Math.max(longest, r.end() - r.start());
        }
        this.longestReserved = longest;
        this.idle = List.copyOf(idle);
        this.thunks = thunks;
        this.returnToUser = List.copyOf(returnToUser);
        this.bti = bti;
        this.notes = List.copyOf(notes);
        this.groupFormsBoostable = false;
    }

    private KernelOptimizationInputs(KernelOptimizationInputs o, boolean groupFormsBoostable) {
        this.arch = o.arch;
        this.exceptionTable = o.exceptionTable;
        this.ftraceSites = o.ftraceSites;
        this.reserved = o.reserved;
        this.reservedByStart.putAll(o.reservedByStart);
        this.longestReserved = o.longestReserved;
        this.idle = o.idle;
        this.thunks = o.thunks;
        this.returnToUser = o.returnToUser;
        this.bti = o.bti;
        this.functionScan = o.functionScan;
        this.notes = o.notes;
        this.groupFormsBoostable = groupFormsBoostable;
    }

    /**
     * These tables with the rules of kernel release {@code release} (its {@code uname -r}): x86's
     * {@code can_boost} accepts the opcode-group forms from Linux 6.9 on
     * ({@link Candidate#groupFormsBoostable()}). Without a release the rules are 6.1's.
     */
    public KernelOptimizationInputs forRelease(String release) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("^(\\d+)\\.(\\d+)").matcher(release == null ? "" : release);
        if (!m.find()) return this;
        int major = Integer.parseInt(m.group(1)), minor = Integer.parseInt(m.group(2));
        boolean since69 = major > 6 || major == 6 && minor >= 9;
        return since69 == groupFormsBoostable ? this : new KernelOptimizationInputs(this, since69);
    }

    @Override public boolean groupFormsBoostable() { return groupFormsBoostable; }

    /**
     * Reads the tables.
     *
     * @param file the kernel file whose offsets {@code syms.fileOffset} gives (x86: vmlinux ELF; arm64: Image)
     */
    public static KernelOptimizationInputs read(Arch arch, SymbolTable syms, byte[] file) {
        return read(arch, syms, dev.kpemu.image.OnDemandFileBytes.inMemory(file, "kernel file"));
    }

    /** As above, reading from the file what the arch's reader needs (x86: the tables alone). */
    public static KernelOptimizationInputs read(Arch arch, SymbolTable syms, dev.kpemu.image.OnDemandFileBytes file) {
        return ArchOptimizer.of(arch).kernelInputs(syms, file);
    }

    // ------------------------------------------------------------------ common

    static List<TextRange> idle(SymbolTable syms, List<String> names) {
        List<TextRange> out = new ArrayList<>();
        for (String n : names) {
            for (Symbol s : syms.allByName(n)) if (s.text() && s.size() > 0) out.add(TextRange.of(s.address(), s.size()));
        }
        return out;
    }

    static List<Long> starts(SymbolTable syms, List<String> names) {
        List<Long> out = new ArrayList<>();
        for (String n : names) for (Symbol s : syms.allByName(n)) if (s.text()) out.add(s.address());
        return out;
    }

    static List<TextRange> merge(List<TextRange> in) {
        List<TextRange> sorted = new ArrayList<>(in);
        sorted.sort((x, y) -> Long.compareUnsigned(x.start(), y.start()));
        List<TextRange> out = new ArrayList<>();
        for (TextRange r : sorted) {
            if (!out.isEmpty() && Long.compareUnsigned(r.start(), out.getLast().end()) <= 0) {
                TextRange last = out.removeLast();
                out.add(new TextRange(last.start(), Long.compareUnsigned(r.end(), last.end()) > 0 ? r.end() : last.end()));
            } else {
                out.add(r);
            }
        }
        return out;
    }

    interface Entry {
        void accept(long at, ByteBuffer entry);
    }

    record Reader(SymbolTable syms, dev.kpemu.image.OnDemandFileBytes file) {
        void table(String start, String stop, int entrySize, List<String> notes, Entry e) {
            Optional<Symbol> a = syms.byName(start), z = syms.byName(stop);
            if (a.isEmpty() || z.isEmpty()) {
                notes.add("no " + start + "/" + stop + " in kallsyms: not read");
                return;
            }
            long from = a.get().address(), to = z.get().address();
            long len = to - from;
            if (len < 0 || len % entrySize != 0) {
                notes.add(start + ": " + len + " bytes is not a multiple of " + entrySize + ": not read");
                return;
            }
            OptionalLong off = syms.fileOffset(from);
            if (off.isEmpty() || off.getAsLong() < 0 || off.getAsLong() + len > file.length()) {
                notes.add(start + ": no file bytes: not read");
                return;
            }
            ByteBuffer b = ByteBuffer.wrap(file.read(off.getAsLong(), (int) len)).order(ByteOrder.LITTLE_ENDIAN);
            int n = (int) (len / entrySize);
            for (int i = 0; i < n; i++) {
                int o = i * entrySize;
                e.accept(from + (long) i * entrySize, b.slice(o, entrySize).order(ByteOrder.LITTLE_ENDIAN));
            }
            notes.add(start + ": " + n + " entries");
        }
    }

    // ------------------------------------------------------------------ OptimizationInputs

    @Override public Set<Long> exceptionTable() { return exceptionTable; }

    @Override public Set<Long> ftraceSites() { return ftraceSites; }

    @Override public List<TextRange> reservedText() { return reserved; }

    /**
     * The parsed tables' entries overlapping {@code function} (x86), or what the arch reader's scan
     * of the function's code finds (arm64: {@link Arm64KernelInputsReader}).
     */
    @Override public List<TextRange> reservedText(TextRange function) {
        if (functionScan != null) return functionScan.apply(function);
        long from = function.start() - longestReserved;
        if (Long.compareUnsigned(from, function.start()) > 0) from = 0;     // wrapped below 0
        if (Long.compareUnsigned(from, function.end()) >= 0) return List.of();
        List<Integer> hits = new ArrayList<>();
        for (List<Integer> at : reservedByStart.subMap(from, true, function.end(), false).values())
            for (int i : at) if (reserved.get(i).overlaps(function)) hits.add(i);
        hits.sort(null);                                                     // in table order, as a scan gives them
        List<TextRange> out = new ArrayList<>(hits.size());
        for (int i : hits) out.add(reserved.get(i));
        return out;
    }

    @Override public TextRange indirectThunks() { return thunks; }

    @Override public boolean landingPadsEnforced() { return bti; }

    /**
     * {@link OptimizationInputs#kernelPatchWindow} on every vCPU: user mode, the idle loop, or the pc
     * exactly at the entry of a return-to-user path ({@link #returnToUser()}).
     */
    @Override public boolean patchWindowOpen(Machine machine) {
        return OptimizationInputs.kernelPatchWindow(machine, idle, returnToUser);
    }

    /**
     * Entry addresses of the kernel's return-to-user paths, where the patch window is open: a boot
     * puts host breakpoints there while jumps are pending, so that they are written at the next
     * return to user mode rather than at the next slice boundary that happens to be in user mode.
     */
    public List<Long> returnToUser() { return returnToUser; }

    /** The idle-loop text where the patch window is open besides user mode. */
    public List<TextRange> idleText() { return idle; }

    public Arch arch() { return arch; }

    /** What was read and what was not, one line each. */
    public List<String> notes() { return notes; }

    @Override public String toString() {
        return "KernelOptimizationInputs[" + arch + ", ex_table " + exceptionTable.size() + ", ftrace " + ftraceSites.size()
                + ", reserved " + reserved.size() + ", idle " + idle.size() + "]";
    }
}
