package dev.kpemu.image;

import dev.kpemu.machine.Arch;
import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.NavigableSet;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeSet;

/**
 * What the kernel records about its own text, read from the kernel <em>file</em> before boot (the
 * kernel frees {@code __mcount_loc} with its init memory and sorts some tables in place, so the
 * file is the stable source): where ftrace can patch (its call sites), the kprobe blacklist, the
 * jump-label, static-call and alternative sites, the exception and bug tables, and named text
 * sections. Tables are bounded by their {@code __start_X/__stop_X} symbols (kallsyms with
 * CONFIG_KALLSYMS_ALL, or the vmlinux's own symbol table); a relocatable arm64 Image's pointers
 * come from its RELATIVE relocations ({@link Arm64Relocations}).
 *
 * <p>Where a table cannot be bounded (Debian 12's arm64 kernel has no CONFIG_KALLSYMS_ALL), it is
 * found by its shape among the Image's relocated pointers: {@code __mcount_loc} is the longest
 * run of pointers into text, {@code _kprobe_blacklist} the run around a pointer to a known
 * NOKPROBE function that is not in ascending order. Both are checked against what Linux itself
 * lists after boot (debugfs kprobes/blacklist, tracefs available_filter_functions).
 * {@link #notes()} says which way each table was read.
 */
public final class KernelTextTables {
    /** An address range [start, end) with a name. */
    public record Range(long start, long end, String name) {
        public boolean contains(long a) { return Long.compareUnsigned(a, start) >= 0 && Long.compareUnsigned(a, end) < 0; }
        public long size() { return end - start; }
    }

    private static final int BTI_C = 0xd503245f, PACIASP = 0xd503233f, PACIBSP = 0xd503237f;
    /**
     * NOKPROBE_SYMBOL functions of arm64's exception and debug code: seeds for finding
     * {@code _kprobe_blacklist} by shape when no symbol bounds it.
     */
    private static final List<String> ARM64_BLACKLIST_SEEDS = List.of("do_el1_bti", "do_undefinstr", "call_break_hook",
            "single_step_handler", "call_step_hook", "do_mem_abort", "do_sp_pc_abort");

    private final Arch arch;
    private final SymbolTable syms;
    /** The kernel file: read whole when the tables are read from it, not when they come from the cache. */
    private final OnDemandFileBytes contents;
    private final Arm64Relocations relocations;
    private final List<String> notes = new ArrayList<>();
    private final NavigableSet<Long> ftraceSites = new TreeSet<>(Long::compareUnsigned);
    private final List<Range> blacklist = new ArrayList<>();
    private final NavigableSet<Long> exceptionTable = new TreeSet<>(Long::compareUnsigned);
    private final Set<Long> bugSites = new LinkedHashSet<>();
    private final List<Range> jumpLabels = new ArrayList<>(), staticCalls = new ArrayList<>();
    /** Sites the kernel rewrites while it boots (x86), sorted by address: see {@link #bootPatchedSites()}. */
    private final List<Range> bootPatched = new ArrayList<>();
    /** x86's {@code .smp_locks}: the {@code lock} prefixes a uniprocessor boot patches (see {@link #smpLockSites()}). */
    private final NavigableSet<Long> smpLocks = new TreeSet<>(Long::compareUnsigned);

    private KernelTextTables(Arch arch, SymbolTable syms, OnDemandFileBytes contents) {
        this(arch, syms, contents, arch == Arch.ARM64 ? Arm64Relocations.of(contents.bytes()) : null);
    }

    private KernelTextTables(Arch arch, SymbolTable syms, OnDemandFileBytes contents, Arm64Relocations relocations) {
        this.arch = arch;
        this.syms = syms;
        this.contents = contents;
        this.relocations = relocations;
    }

    /** The tables as {@link #readFrom} reads them back (what {@link KernelTextTablesCache} keeps between runs). */
    void writeTo(DataOutput out) throws IOException {
        out.writeUTF(arch.name());
        writeLongs(out, ftraceSites);
        writeRanges(out, blacklist);
        writeLongs(out, exceptionTable);
        writeLongs(out, bugSites);
        writeRanges(out, jumpLabels);
        writeRanges(out, staticCalls);
        writeRanges(out, bootPatched);
        writeLongs(out, smpLocks);
        out.writeInt(notes.size());
        for (String n : notes) out.writeUTF(n);
    }

    /** Tables {@link #writeTo} wrote for the kernel of {@code syms} and {@code file}. */
    static KernelTextTables readFrom(DataInput in, Arch arch, SymbolTable syms, OnDemandFileBytes file) throws IOException {
        if (!in.readUTF().equals(arch.name())) throw new IOException("the tables are of another architecture");
        KernelTextTables t = new KernelTextTables(arch, syms, file, null);
        readLongs(in, t.ftraceSites);
        readRanges(in, t.blacklist);
        readLongs(in, t.exceptionTable);
        readLongs(in, t.bugSites);
        readRanges(in, t.jumpLabels);
        readRanges(in, t.staticCalls);
        readRanges(in, t.bootPatched);
        readLongs(in, t.smpLocks);
        for (int n = count(in); n > 0; n--) t.notes.add(in.readUTF());
        return t;
    }

    private static void writeLongs(DataOutput out, java.util.Collection<Long> values) throws IOException {
        out.writeInt(values.size());
        for (long v : values) out.writeLong(v);
    }

    private static void readLongs(DataInput in, java.util.Collection<Long> into) throws IOException {
        for (int n = count(in); n > 0; n--) into.add(in.readLong());
    }

    private static void writeRanges(DataOutput out, List<Range> ranges) throws IOException {
        out.writeInt(ranges.size());
        for (Range r : ranges) {
            out.writeLong(r.start());
            out.writeLong(r.end());
            out.writeUTF(r.name());
        }
    }

    private static void readRanges(DataInput in, List<Range> into) throws IOException {
        for (int n = count(in); n > 0; n--) into.add(new Range(in.readLong(), in.readLong(), in.readUTF()));
    }

    private static int count(DataInput in) throws IOException {
        int n = in.readInt();
        if (n < 0) throw new IOException("a negative count");
        return n;
    }

    /**
     * Reads the tables of a kernel.
     *
     * @param file the bytes {@code syms.fileOffset} indexes (x86: the vmlinux ELF; arm64: the Image)
     */
    public static KernelTextTables read(Arch arch, SymbolTable syms, byte[] file) {
        return read(arch, syms, OnDemandFileBytes.inMemory(file, "kernel file"));
    }

    /** As {@link #read(Arch, SymbolTable, byte[])}; reads the file whole. */
    public static KernelTextTables read(Arch arch, SymbolTable syms, OnDemandFileBytes file) {
        KernelTextTables t = new KernelTextTables(arch, syms, file);
        t.readFtraceSites();
        t.readBlacklist();
        t.readReservedSites();
        return t;
    }

    // ------------------------------------------------------------------ ftrace

    private void readFtraceSites() {
        List<Long> records = new ArrayList<>();
        boolean bounded = table("__start_mcount_loc", "__stop_mcount_loc", 8, (at, b) -> records.add(pointer(at, b, 0)));
        if (!bounded && arch == Arch.ARM64) records.addAll(arm64McountByShape());
        boolean callOps = arch == Arch.ARM64 && arm64CallOps(records);
        if (callOps) notes.add("ftrace sites: records point at pre-function NOPs (DYNAMIC_FTRACE_WITH_CALL_OPS)");
        for (long r : records) ftraceSites.add(arch == Arch.ARM64 ? arm64CallSite(callOps ? r + 8 : r) : r);
    }

    /**
     * Whether the kernel's records point 8 bytes before their functions (the two pre-function NOPs
     * of CALL_OPS) rather than at them: decided by the majority of records.
     */
    private boolean arm64CallOps(List<Long> records) {
        int at = 0, before = 0;
        for (long r : records) {
            if (functionStartsAt(r)) at++;
            else if (functionStartsAt(r + 8)) before++;
        }
        return before > at;
    }

    private byte[] file() { return contents.bytes(); }

    private boolean functionStartsAt(long a) {
        Optional<Symbol> s = syms.lookup(a);
        return s.isPresent() && s.get().address() == a;
    }

    /**
     * arm64's {@code ftrace_call_adjust} from a function's entry (the record, or with CALL_OPS the
     * record + 8): ftrace patches the second NOP of the pair that follows the entry's landing pad
     * ({@code bti c}, {@code paciasp}).
     */
    private long arm64CallSite(long entry) {
        long at = entry;
        OptionalLong off = syms.fileOffset(at);
        if (off.isPresent() && off.getAsLong() + 4 <= file().length) {
            int w = ImageFiles.le(file()).getInt((int) off.getAsLong());
            if (w == BTI_C || w == PACIASP || w == PACIBSP) at += 4;
        }
        return at + 4;
    }

    private static final int MIN_MCOUNT_BY_SHAPE = 5000;

    /**
     * arm64 without a bounded {@code __mcount_loc}: the table is the longest run of relocated
     * pointers that all point into text (one per traceable function: tens of thousands; the next
     * longest such tables, e.g. the system-call table, hold a few hundred).
     */
    private List<Long> arm64McountByShape() {
        int bestStart = 0, bestLen = 0, start = -1;
        for (int i = 0; i <= relocations.size(); i++) {
            boolean text = i < relocations.size() && isText(relocations.addendAt(i));
            boolean adjacent = start >= 0 && text && relocations.offsetAt(i) - relocations.offsetAt(i - 1) == 8;
            if (adjacent) continue;
            if (start >= 0 && i - start > bestLen) { bestLen = i - start; bestStart = start; }
            start = text ? i : -1;
        }
        if (bestLen < MIN_MCOUNT_BY_SHAPE) {
            notes.add("ftrace sites: no __start_mcount_loc and no run of text pointers long enough to be it: none");
            return List.of();
        }
        List<Long> out = new ArrayList<>(bestLen);
        for (int i = bestStart; i < bestStart + bestLen; i++) out.add(relocations.addendAt(i));
        notes.add("ftrace sites: no __start_mcount_loc; " + bestLen + " records found by shape");
        return out;
    }

    // ------------------------------------------------------------------ blacklist

    private void readBlacklist() {
        List<Long> entries = new ArrayList<>();
        boolean bounded = table("__start_kprobe_blacklist", "__stop_kprobe_blacklist", 8, (at, b) -> entries.add(pointer(at, b, 0)));
        if (!bounded && arch == Arch.ARM64) entries.addAll(arm64BlacklistByShape());
        for (long e : entries) addFunction(e);
        area("__kprobes_text_start", "__kprobes_text_end");
        area("__noinstr_text_start", "__noinstr_text_end");
        area("__entry_text_start", "__entry_text_end");
        if (arch == Arch.ARM64) {
            area("__irqentry_text_start", "__irqentry_text_end");
            // the ID map is text until 6.3, which moved it to .rodata and stopped blacklisting it
            Optional<Range> text = section("_stext", "_etext"), idmap = section("__idmap_text_start", "__idmap_text_end");
            if (text.isPresent() && idmap.isPresent() && text.get().contains(idmap.get().start())) area("__idmap_text_start", "__idmap_text_end");
            area("__hyp_text_start", "__hyp_text_end");
            area("__hyp_idmap_text_start", "__hyp_idmap_text_end");
        }
    }

    /**
     * {@code kprobe_add_ksym_blacklist}: the whole function containing {@code entry}, when it is
     * kernel text ({@code kernel_text_address}: core or init text; 6.12's arm64 SDEI trampolines
     * are NOKPROBE but live outside it); its size, or 0.
     */
    private long addFunction(long entry) {
        Optional<Symbol> s = syms.lookup(entry);
        if (s.isEmpty() || !s.get().text() || !kernelText(entry)) return 0;
        blacklist.add(new Range(s.get().address(), s.get().address() + s.get().size(), s.get().name()));
        return s.get().size();
    }

    private boolean kernelText(long address) {
        Optional<Range> text = section("_stext", "_etext"), init = section("_sinittext", "_einittext");
        if (text.isEmpty()) return true;
        return text.get().contains(address) || (init.isPresent() && init.get().contains(address));
    }

    /** {@code kprobe_add_area_blacklist}: every function from {@code start} to {@code end}. */
    private void area(String start, String end) {
        Optional<Symbol> a = syms.byName(start), z = syms.byName(end);
        if (a.isEmpty() || z.isEmpty()) return;
        for (long e = a.get().address(); Long.compareUnsigned(e, z.get().address()) < 0; ) {
            long size = addFunction(e);
            e += size > 0 ? size : 1;
        }
    }

    /**
     * The run of relocated function-start pointers around a pointer to a NOKPROBE seed function.
     * The seeds are pointed to from other tables too, above all ftrace's {@code __mcount_loc}
     * (a far longer run, in ascending address order); {@code _kprobe_blacklist} is in declaration
     * order, so runs that ascend almost everywhere are not it.
     */
    private List<Long> arm64BlacklistByShape() {
        List<Long> best = List.of();
        for (String seed : ARM64_BLACKLIST_SEEDS) {
            Optional<Symbol> s = syms.byName(seed);
            if (s.isEmpty()) continue;
            for (long slot : relocations.pointersTo(s.get().address())) {
                List<Long> run = pointerRun(slot);
                if (run.size() > best.size() && ascendingFraction(run) < 0.9) best = run;
            }
        }
        notes.add("kprobe blacklist: no __start_kprobe_blacklist; " + (best.size() >= 16
                ? best.size() + " entries found by shape" : "not found by shape"));
        return best.size() >= 16 ? best : List.of();
    }

    private static double ascendingFraction(List<Long> run) {
        int up = 0;
        for (int i = 1; i < run.size(); i++) if (Long.compareUnsigned(run.get(i), run.get(i - 1)) > 0) up++;
        return run.size() < 2 ? 1 : (double) up / (run.size() - 1);
    }

    /**
     * The relocated pointers adjacent to {@code slot} (8 bytes apart) that point into text. Linux's
     * table may hold a few entries that are not text (its loader skips them), so up to
     * {@value #MAX_NON_TEXT_RUN} consecutive non-text pointers inside the run are stepped over;
     * the neighbouring tables (pointers to data, or entries of another stride) end it.
     */
    private List<Long> pointerRun(long slot) {
        int i = relocations.indexOf(slot);
        int lo = extend(i, -1), hi = extend(i, +1);
        List<Long> out = new ArrayList<>();
        for (int k = lo; k <= hi; k++) if (isText(relocations.addendAt(k))) out.add(relocations.addendAt(k));
        return out;
    }

    private static final int MAX_NON_TEXT_RUN = 2;

    /** The last index from {@code i} in direction {@code dir} that still belongs to the run (a text pointer). */
    private int extend(int i, int dir) {
        int last = i, nonText = 0;
        for (int k = i + dir; k >= 0 && k < relocations.size(); k += dir) {
            if (relocations.offsetAt(k) - relocations.offsetAt(k - dir) != 8L * dir) break;
            if (isText(relocations.addendAt(k))) {
                last = k;
                nonText = 0;
            } else if (++nonText > MAX_NON_TEXT_RUN) {
                break;
            }
        }
        return last;
    }

    private boolean isText(long a) {
        Optional<Symbol> s = syms.lookup(a);
        return s.isPresent() && s.get().text() && Long.compareUnsigned(a - s.get().address(), Math.max(1, s.get().size())) < 0;
    }

    // ------------------------------------------------------------------ reserved sites

    private void readReservedSites() {
        boolean ex = table("__start___ex_table", "__stop___ex_table", 12, (at, b) -> exceptionTable.add(at + b.getInt(0)));
        if (!ex && arch == Arch.ARM64) arm64ExceptionTableByShape();
        boolean jl = table("__start___jump_table", "__stop___jump_table", 16, (at, b) -> jumpLabels.add(new Range(at + b.getInt(0), at + b.getInt(0) + jumpLabelLength(at + b.getInt(0)), "jump label")));
        if (!jl && arch == Arch.ARM64) {
            List<Range> found = arm64JumpTableByShape();
            jumpLabels.addAll(found);
            notes.add(found.isEmpty() ? "__jump_table: not bounded and not found by shape: not read"
                    : "__jump_table: not bounded; " + found.size() + " entries found by shape");
        }
        table("__start_static_call_sites", "__stop_static_call_sites", 8, (at, b) -> staticCalls.add(new Range(at + b.getInt(0), at + b.getInt(0) + 5, "static call")));
        if (arch == Arch.X86_64) {
            readBootPatchedSites();
            table("__smp_locks", "__smp_locks_end", 4, (at, b) -> {
                if (isText(at + b.getInt(0))) smpLocks.add(at + b.getInt(0));   // the section is padded to a page with zeros
            });
        }
        table("__start___bug_table", "__stop___bug_table", 12, (at, b) -> bugSites.add(at + b.getInt(0)));
    }

    /**
     * x86's tables of the sites Linux rewrites in its own text while it boots, before any probe
     * can be registered ({@code alternative_instructions}, {@code apply_paravirt},
     * {@code apply_retpolines}, {@code apply_returns}, {@code callthunks_patch_builtin_calls}):
     * <ul>
     * <li>{@code .altinstructions}: {@code struct alt_instr}, 12 bytes up to 6.2
     *     ({@code u16 cpuid}; {@code instrlen} at 10), 14 from 6.3 ({@code u32 ft_flags};
     *     {@code instrlen} at 12) — told apart by which size divides the table and points every
     *     entry into text;</li>
     * <li>{@code .parainstructions} (up to 6.7, when paravirt calls became alternatives):
     *     {@code struct paravirt_patch_site}, an absolute pointer then {@code type} and
     *     {@code len} bytes, aligned to 8 (16 bytes), or from 6.6 a relative {@code s32} then the
     *     two bytes (8 bytes aligned, 6 packed);</li>
     * <li>{@code .retpoline_sites}, {@code .return_sites}, {@code .call_sites}: {@code s32}
     *     offsets to a call, jump or conditional jump (a {@code cs} prefix allowed), whose length
     *     the site's opcode gives.</li>
     * </ul>
     * What these sites hold after boot depends on the CPU the kernel found, so a probe there is
     * decided on the running kernel's text, as Linux decides it.
     */
    private void readBootPatchedSites() {
        if (!altTable(14, 12) && !altTable(12, 10)) notes.add("altinstructions: no entry size fits: not read");
        if (syms.byName("__parainstructions").isPresent()
                && !paravirtTable(16, false) && !paravirtTable(8, true) && !paravirtTable(6, true))
            notes.add("parainstructions: no entry layout fits: not read");
        branchSites("__retpoline_sites", "__retpoline_sites_end", "retpoline");
        branchSites("__return_sites", "__return_sites_end", "return thunk");
        branchSites("__call_sites", "__call_sites_end", "call depth");
        bootPatched.sort((x, y) -> Long.compareUnsigned(x.start(), y.start()));
    }

    private boolean altTable(int size, int lenAt) {
        List<Range> found = new ArrayList<>();
        if (!shapedTable("__alt_instructions", "__alt_instructions_end", size, (at, b) -> {
            int len = b.get(lenAt) & 0xff;
            long site = at + b.getInt(0);
            return len > 0 && len <= 64 && isText(site) ? new Range(site, site + len, "alternative") : null;
        }, found)) return false;
        bootPatched.addAll(found);
        return true;
    }

    private boolean paravirtTable(int size, boolean relative) {
        List<Range> found = new ArrayList<>();
        int lenAt = relative ? 5 : 9;
        if (!shapedTable("__parainstructions", "__parainstructions_end", size, (at, b) -> {
            long site = relative ? at + b.getInt(0) : pointer(at, b, 0);
            int len = b.get(lenAt) & 0xff;
            return len > 0 && len <= 32 && isText(site) ? new Range(site, site + len, "paravirt") : null;
        }, found)) return false;
        bootPatched.addAll(found);
        return true;
    }

    private void branchSites(String start, String end, String kind) {
        table(start, end, 4, (at, b) -> {
            long site = at + b.getInt(0);
            int len = branchLength(site);
            if (len > 0) bootPatched.add(new Range(site, site + len, kind));
        });
    }

    /** The length of the call or jump at {@code site} in the file: e8/e9 rel32, 0f 8x rel32, each after an optional cs prefix; 0 if none. */
    private int branchLength(long site) {
        OptionalLong off = syms.fileOffset(site);
        if (off.isEmpty() || off.getAsLong() + 3 > file().length) return 0;
        int o = (int) off.getAsLong();
        int prefix = (file()[o] & 0xff) == 0x2e ? 1 : 0;
        int op = file()[o + prefix] & 0xff;
        if (op == 0xe8 || op == 0xe9) return prefix + 5;
        if (op == 0x0f && (file()[o + prefix + 1] & 0xf0) == 0x80) return prefix + 6;
        return 0;
    }

    private interface ShapedEntry { Range accept(long at, ByteBuffer entry); }

    /**
     * A table of entries of {@code size} whose layout is known only by its shape: read when the
     * size divides it and every entry gives a site ({@code e} returns null for one that does not).
     */
    private boolean shapedTable(String start, String stop, int size, ShapedEntry e, List<Range> into) {
        Optional<Symbol> a = syms.byName(start), z = syms.byName(stop);
        if (a.isEmpty() || z.isEmpty()) return false;
        long from = a.get().address(), len = z.get().address() - from;
        OptionalLong off = syms.fileOffset(from);
        if (len <= 0 || len % size != 0 || off.isEmpty() || off.getAsLong() + len > file().length) return false;
        ByteBuffer b = ImageFiles.le(file());
        int n = (int) (len / size);
        for (int i = 0; i < n; i++) {
            int o = (int) off.getAsLong() + i * size;
            Range r = e.accept(from + (long) i * size, b.slice(o, size).order(java.nio.ByteOrder.LITTLE_ENDIAN));
            if (r == null) {
                into.clear();
                return false;
            }
            into.add(r);
        }
        notes.add(start.replaceFirst("^__", "") + ": " + n + " " + size + "-byte entries");
        return true;
    }

    private static final int MIN_EX_TABLE_BY_SHAPE = 64;

    /**
     * arm64 without a bounded {@code __ex_table}: the longest run of 12-byte entries
     * ({@code int insn, fixup; short type, data}, both offsets relative to their own field) whose
     * instruction and fixup lie in text (a zero offset, as in zero padding inside text, is no entry),
     * in ascending instruction order (the build sorts the table).
     */
    private void arm64ExceptionTableByShape() {
        Optional<Range> text = section("_stext", "_etext");
        if (text.isEmpty()) return;
        ByteBuffer b = ImageFiles.le(file());
        long base = syms.linkBase();
        int bestStart = -1, bestLen = 0;
        for (int phase = 0; phase < 12; phase += 4) {
            int runStart = -1, runLen = 0;
            long prev = 0;
            for (int o = phase; o + 12 <= file().length; o += 12) {
                long at = base + o;
                long insn = at + b.getInt(o), fixup = at + 4 + b.getInt(o + 4);
                int type = b.getShort(o + 8);
                boolean entry = b.getInt(o) != 0 && text.get().contains(insn) && text.get().contains(fixup) && type >= 0 && type < 16;
                boolean ok = entry && (runLen == 0 || Long.compareUnsigned(insn, prev) >= 0);
                if (ok) {
                    if (runLen == 0) runStart = o;
                    runLen++;
                    prev = insn;
                    if (runLen > bestLen) { bestLen = runLen; bestStart = runStart; }
                } else {
                    runLen = 0;
                    if (entry) { runStart = o; runLen = 1; prev = insn; }
                }
            }
        }
        if (bestLen < MIN_EX_TABLE_BY_SHAPE) {
            notes.add("__ex_table: not bounded and not found by shape: not read");
            return;
        }
        for (int i = 0; i < bestLen; i++) {
            int o = bestStart + 12 * i;
            exceptionTable.add(base + o + b.getInt(o));
        }
        notes.add("__ex_table: not bounded; " + bestLen + " entries found by shape");
    }

    private static final int MIN_JUMP_TABLE_BY_SHAPE = 256;
    private static final int A64_NOP = 0xd503201f;
    /** How far a static branch's target may lie from its site (within one function). */
    private static final long MAX_STATIC_BRANCH = 1 << 20;

    /**
     * arm64 without a bounded {@code __jump_table} (Debian's 6.1: no CONFIG_KALLSYMS_ALL, so no
     * {@code __start___jump_table}): the longest run of 16-byte entries ({@code struct jump_entry}:
     * {@code s32 code, target} relative to their own fields, {@code long key} relative to its own
     * field with the branch/init flags in bits 0-1) whose code is a {@code NOP} or {@code B} (how
     * a static branch is built) in text, whose target is in text, and whose key lies past the text
     * (a {@code struct static_key} in data or bss). Linux refuses probes on these sites
     * ({@code jump_label_text_reserved}): recorded on 6.1 for {@code p ___slab_alloc+816} and
     * {@code p acct_collect+172}, both such NOPs.
     */
    List<Range> arm64JumpTableByShape() {
        Optional<Range> text = section("_stext", "_etext");
        if (text.isEmpty()) return List.of();
        ByteBuffer b = ImageFiles.le(file());
        long base = syms.linkBase();
        long dataEnd = syms.byName("_end").map(Symbol::address).orElse(base + 2L * file().length);
        int bestStart = -1, bestLen = 0;
        for (int phase = 0; phase < 16; phase += 8) {
            int runStart = -1, runLen = 0;
            for (int o = phase; o + 16 <= file().length; o += 16) {
                if (jumpEntryAt(b, base, o, text.get(), dataEnd)) {
                    if (runLen == 0) runStart = o;
                    if (++runLen > bestLen) { bestLen = runLen; bestStart = runStart; }
                } else {
                    runLen = 0;
                }
            }
        }
        if (bestLen < MIN_JUMP_TABLE_BY_SHAPE) return List.of();
        List<Range> out = new ArrayList<>(bestLen);
        for (int i = 0; i < bestLen; i++) {
            int o = bestStart + 16 * i;
            long code = base + o + b.getInt(o);
            out.add(new Range(code, code + jumpLabelLength(code), "jump label"));
        }
        return out;
    }

    /**
     * An entry at file offset {@code o}: code and target in the image from {@code _stext} on
     * (static branches in init and exit text count, and those lie past {@code _etext}), the target
     * near the code (a branch inside its function), the key past the text.
     */
    private boolean jumpEntryAt(ByteBuffer b, long base, int o, Range text, long dataEnd) {
        long at = base + o;
        long code = at + b.getInt(o), target = at + 4 + b.getInt(o + 4), key = at + 8 + (b.getLong(o + 8) & ~3L);
        if (b.getInt(o) == 0 || ((code | target) & 3) != 0 || Math.abs(target - code) > MAX_STATIC_BRANCH) return false;
        if (Long.compareUnsigned(key, text.end()) < 0 || Long.compareUnsigned(key, dataEnd) >= 0) return false;
        if (Long.compareUnsigned(code, text.start()) < 0 || Long.compareUnsigned(code, dataEnd) >= 0) return false;
        long insnOff = code - base;
        if (insnOff < 0 || insnOff + 4 > file().length) return false;
        int w = b.getInt((int) insnOff);
        return w == A64_NOP || (w & 0xfc000000) == 0x14000000;
    }

    /** Bytes the jump-label site at {@code code} occupies: x86 decodes it (2 or 5), arm64 one instruction. */
    private int jumpLabelLength(long code) {
        if (arch != Arch.X86_64) return 4;
        // arch_jump_entry_size decodes the site: a 2-byte jump or NOP (jmp rel8, 66 90) since 5.14, else 5 bytes
        OptionalLong off = syms.fileOffset(code);
        if (off.isEmpty() || off.getAsLong() + 2 > file().length) return 5;
        int b0 = file()[(int) off.getAsLong()] & 0xff, b1 = file()[(int) off.getAsLong() + 1] & 0xff;
        return b0 == 0xeb || (b0 == 0x66 && b1 == 0x90) ? 2 : 5;
    }

    // ------------------------------------------------------------------ reading

    private interface Entry { void accept(long at, ByteBuffer entry); }

    /** Reads {@code [start, stop)} in entries of {@code entrySize}; false (with a note) when it cannot. */
    private boolean table(String start, String stop, int entrySize, Entry e) {
        Optional<Symbol> a = syms.byName(start), z = syms.byName(stop);
        String name = start.replaceFirst("^__start_", "");
        if (a.isEmpty() || z.isEmpty()) {
            notes.add(name + ": no " + start + "/" + stop + " in the symbols: not read");
            return false;
        }
        long from = a.get().address(), len = z.get().address() - from;
        OptionalLong off = syms.fileOffset(from);
        if (len < 0 || len % entrySize != 0 || off.isEmpty() || off.getAsLong() + len > file().length) {
            notes.add(name + ": " + len + " bytes at 0x" + Long.toHexString(from) + " are not whole " + entrySize + "-byte entries in the file: not read");
            return false;
        }
        ByteBuffer b = ImageFiles.le(file());
        int n = (int) (len / entrySize);
        for (int i = 0; i < n; i++) {
            int o = (int) off.getAsLong() + i * entrySize;
            e.accept(from + (long) i * entrySize, b.slice(o, entrySize).order(java.nio.ByteOrder.LITTLE_ENDIAN));
        }
        notes.add(name + ": " + n + " entries");
        return true;
    }

    /** An absolute pointer in an entry at link address {@code at}: the file's value, or its relocation's. */
    private long pointer(long at, ByteBuffer entry, int offset) {
        long v = entry.getLong(offset);
        if (v == 0 && relocations != null) return relocations.valueAt(at + offset).orElse(0);
        return v;
    }

    // ------------------------------------------------------------------ results

    public Arch arch() { return arch; }

    /** Addresses ftrace records as call sites (after {@code ftrace_call_adjust}), init text included. */
    public NavigableSet<Long> ftraceSites() { return Collections.unmodifiableNavigableSet(ftraceSites); }

    /** The kprobe blacklist as debugfs {@code kprobes/blacklist} lists it: one function extent per entry. */
    public List<Range> kprobeBlacklist() { return List.copyOf(blacklist); }

    /** Faulting-instruction addresses of the exception table (x86; empty where not bounded). */
    public NavigableSet<Long> exceptionTable() { return Collections.unmodifiableNavigableSet(exceptionTable); }

    /** {@code BUG()}/{@code WARN()} trap addresses ({@code find_bug}). */
    public Set<Long> bugSites() { return Collections.unmodifiableSet(bugSites); }

    public List<Range> jumpLabels() { return List.copyOf(jumpLabels); }

    public List<Range> staticCalls() { return List.copyOf(staticCalls); }

    /**
     * The x86 sites the kernel rewrites while it boots (alternatives, paravirt calls, retpoline,
     * return-thunk and call-depth sites), sorted by start: what the kernel file holds there is not
     * what the running kernel runs.
     */
    public List<Range> bootPatchedSites() { return List.copyOf(bootPatched); }

    /**
     * x86's {@code .smp_locks} ({@code s32} offsets to {@code lock} prefixes): with one CPU Linux
     * rewrites each to a {@code ds} prefix and keeps the table, so jump optimization refuses a
     * region holding one ({@code alternatives_text_reserved}); empty where the table is not bounded.
     */
    public NavigableSet<Long> smpLockSites() { return Collections.unmodifiableNavigableSet(smpLocks); }

    /** The boot-patched site holding {@code address}, if any. */
    public Optional<Range> bootPatchedSiteAt(long address) { return bootPatchedSiteAt(address, r -> true); }

    /** The boot-patched site of the kinds {@code which} takes holding {@code address}, if any. */
    public Optional<Range> bootPatchedSiteAt(long address, java.util.function.Predicate<Range> which) {
        int lo = 0, hi = bootPatched.size() - 1;
        while (lo <= hi) {   // the last site starting at or before the address (sites may nest: check a few back)
            int mid = (lo + hi) >>> 1;
            if (Long.compareUnsigned(bootPatched.get(mid).start(), address) <= 0) lo = mid + 1; else hi = mid - 1;
        }
        for (int i = hi; i >= 0 && i > hi - 8; i--) if (bootPatched.get(i).contains(address) && which.test(bootPatched.get(i))) return Optional.of(bootPatched.get(i));
        return Optional.empty();
    }

    /**
     * The kernel's own error-injection list, where it was built with CONFIG_FUNCTION_ERROR_INJECTION:
     * {@code _error_injection_whitelist} between {@code __start_error_injection_whitelist} and
     * {@code __stop_error_injection_whitelist}, entries {@code {unsigned long addr; int etype;}}
     * (16 bytes; include/asm-generic/error-injection.h), an arm64 Image's addresses from its
     * relocations. Function address to Linux's {@code EI_ETYPE_*} number (0 NULL, 1 ERRNO,
     * 2 ERRNO_NULL, 3 TRUE); empty when the kernel has none.
     */
    public static java.util.Map<Long, Integer> errorInjectionWhitelist(Arch arch, SymbolTable syms, byte[] file) {
        KernelTextTables t = new KernelTextTables(arch, syms, OnDemandFileBytes.inMemory(file, "kernel file"));
        java.util.Map<Long, Integer> out = new java.util.LinkedHashMap<>();
        t.table("__start_error_injection_whitelist", "__stop_error_injection_whitelist", 16, (at, b) -> {
            long fn = t.pointer(at, b, 0);
            if (fn != 0) out.put(fn, b.getInt(8));
        });
        return out;
    }

    /** A section bounded by two symbols, e.g. {@code _sinittext}/{@code _einittext}. */
    public Optional<Range> section(String start, String end) {
        Optional<Symbol> a = syms.byName(start), z = syms.byName(end);
        return a.isPresent() && z.isPresent() ? Optional.of(new Range(a.get().address(), z.get().address(), start)) : Optional.empty();
    }

    /** What was read and how, one line per table. */
    public List<String> notes() { return List.copyOf(notes); }
}
