package dev.kpemu.kprobes.events;

import dev.kpemu.kprobes.RecordedHit;
import dev.kpemu.kprobes.Regs;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.machine.RecordedProbeHits;

import java.util.Arrays;
import java.util.Objects;

/**
 * The {@link FetchContext} of a probe hit on a running {@link Machine}: registers by
 * {@code struct pt_regs} slot from the trapped CPU ({@link Regs}), guest memory through the
 * guest's current page tables, and the current task found as {@link TaskLayout} says.
 *
 * <p>One instance serves every hit of an engine; {@link #begin()} starts a hit (it forgets the
 * previous hit's task). Never throws: a read the MMU would refuse returns false.
 *
 * <p>Memory rules (what the kernel's nofault accessors allow):
 * <ul>
 * <li>{@link #readKernel}: x86-64 only addresses from {@code 0xffff800000000000} up
 *     ({@code copy_from_kernel_nofault_allowed}: above TASK_SIZE_MAX + one page, canonical);
 *     arm64 refuses the TTBR0 (user) half, as PAN makes those loads fault.</li>
 * <li>{@link #readUser}: every byte below TASK_SIZE_MAX ({@code access_ok}: x86-64
 *     {@code 0x7ffffffff000}, arm64 {@code 1 << 48}); on arm64 the page must also be EL0
 *     readable, as the kernel's uaccess uses unprivileged {@code LDTR} loads. On x86-64 the
 *     U/S bit is not checked (the kernel reaches user pages with SMAP lifted).</li>
 * <li>Both: every page must be present in the current tables and backed by RAM (never MMIO).
 *     A failed read leaves the destination untouched.</li>
 * </ul>
 */
public final class MachineFetchContext implements FetchContext {
    /** x86-64 {@code TASK_SIZE_MAX} with 4-level paging. */
    public static final long X86_TASK_SIZE_MAX = (1L << 47) - 4096;
    /** arm64 {@code TASK_SIZE_MAX} with 48-bit VAs. */
    public static final long ARM64_TASK_SIZE_MAX = 1L << 48;
    private static final long X86_KERNEL_MIN = 0xffff_8000_0000_0000L;

    private static final String[] X86_SLOTS = {"r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8",
            "rax", "rcx", "rdx", "rsi", "rdi", null /* orig_ax */, "rip", "cs", "rflags", "rsp", "ss"};
    private static final int X86_ORIG_AX = 15;
    private static final String[] ARM64_SLOTS;

    static {
        ARM64_SLOTS = new String[34];
        for (int i = 0; i <= 30; i++) ARM64_SLOTS[i] = "x" + i;
        ARM64_SLOTS[31] = "sp";
        ARM64_SLOTS[32] = "pc";
        ARM64_SLOTS[33] = "pstate";
    }

    /** The slot of the flags register: x86 {@code rflags}, arm64 {@code pstate}. */
    private static final int X86_FLAGS = 18, ARM64_FLAGS = 33;

    private final Machine machine;
    private final Regs regs;
    private final Arch arch;
    private final KernelSymbols symbols;
    private final TaskLayout task;
    private final String[] slots;
    private final byte[] word = new byte[8];
    /**
     * The hit's registers by slot, each read at its first use (the guest does not run during a
     * hit; in a hit the engine's {@link Regs} serve them from one batch, {@code LiveRegs}).
     */
    private final long[] slotValues;
    private long slotsRead;

    private Regs current;
    private boolean taskKnown;
    private long taskPointer;
    private byte[] comm;

    /**
     * @param regs    the engine's register view ({@link dev.kpemu.kprobes.Kprobes#regs()})
     * @param task    where current is; null when unknown ({@code $comm} is empty, pid 0)
     */
    public MachineFetchContext(Machine machine, Regs regs, KernelSymbols symbols, TaskLayout task) {
        this.machine = Objects.requireNonNull(machine);
        this.regs = Objects.requireNonNull(regs);
        this.current = regs;
        this.arch = machine.arch();
        this.symbols = Objects.requireNonNull(symbols);
        if (task != null && task.arch() != arch)
            throw new IllegalArgumentException("task layout for " + task.arch() + " on a " + arch + " machine");
        this.task = task;
        this.slots = arch == Arch.X86_64 ? X86_SLOTS : ARM64_SLOTS;
        this.slotValues = new long[slots.length];
    }

    /** The register of {@code slot} (a named one), read once per hit. */
    private long slotValue(int slot) {
        long bit = 1L << slot;
        if ((slotsRead & bit) == 0) {
            slotValues[slot] = recorded != null ? recordedRegister(slot) : current.get(slots[slot]);
            slotsRead |= bit;
        }
        return slotValues[slot];
    }

    /**
     * A recorded hit's register of {@code slot}, by its index in the record ({@link #recordedSlot},
     * looked up once per slot: the records of one capture hold the same registers).
     */
    private long recordedRegister(int slot) {
        int i = recordedSlot[slot];
        if (i < 0) recordedSlot[slot] = i = recorded.registerIndex(slots[slot]);   // throws for a register not captured
        return recorded.register(i);
    }

    /** Each slot's index among the registers of {@link #indexedRegs}' records (-1: not looked up yet). */
    private int[] recordedSlot = new int[0];
    private Regs indexedRegs;

    private long watchAddress;

    /** Sets the hit's {@code $addr} (a wprobe's watched address), after {@link #begin}. */
    public void watchAddress(long address) { watchAddress = address; }

    @Override public long watchAddress() { return watchAddress; }

    private long fileOffsetBase;

    /**
     * Sets a uprobe hit's context, after {@link #begin}: where the probed file's offset 0 is
     * mapped ({@code @+OFFS}) and the task that hit, which the user-mode registers cannot tell
     * (x86-64's GS base and arm64's SP_EL0 are the user's there).
     */
    public void userHit(long fileOffsetBase, long task) {
        this.fileOffsetBase = fileOffsetBase;
        taskKnown = true;
        taskPointer = task;
    }

    @Override public long fileOffsetBase() { return fileOffsetBase; }

    /** Starts a new hit: the current task is read again when asked for. */
    public void begin() {
        begin(null);
    }

    /**
     * Starts a new hit whose handler was given {@code hitRegs}: registers are read through them
     * (an optimized probe's view shows x86 {@code ip} = probe + 1, not the detour's live rip, as
     * Linux's {@code optimized_callback} sets it); null reads the engine's live view.
     */
    public void begin(Regs hitRegs) {
        recorded = null;
        watchAddress = 0;
        fileOffsetBase = 0;
        taskKnown = false;
        comm = null;
        current = hitRegs != null ? hitRegs : regs;
        pages = 0;
        walker = null;
        slotsRead = 0;
    }

    /** The recorded hit this hit reads ({@link #beginRecorded}), or null: the live guest. */
    private RecordedHit recorded;
    private RecordedProbeHits.Word[] recordedWords;

    /**
     * Starts a hit the machine's native code recorded ({@link RecordedHit}): registers from the
     * record, and guest memory only as the record captured it ({@link RecordedHit#words()}, word 0
     * the current task): the reads of the current task, its pid and comm and the latency column's words that
     * {@link #currentTask}, {@link #pid}, {@link #comm} and {@link LatencyLayout#state} make, and
     * the kernel memory the probe's site planned ({@link RecordedHit#readAt}). Any other read of
     * guest memory fails loudly (IllegalStateException): a handler that reads other memory is never
     * recorded.
     */
    public void beginRecorded(RecordedHit hit) {
        begin(hit.regs());
        if (hit.regs() != indexedRegs) {
            indexedRegs = hit.regs();
            recordedSlot = new int[slots.length];
            Arrays.fill(recordedSlot, -1);
        }
        RecordedProbeHits.Word[] words = hit.words();
        recorded = hit;
        recordedWords = words;
        if (recordedAddress.length < words.length) recordedAddress = new long[words.length];
        long gs = 0, task = hit.wordRead(0) ? hit.wordValue(0) : 0;
        boolean gsRead = false;
        for (int k = 0; k < words.length; k++) {
            long base = switch (words[k].base()) {
                case ABSOLUTE -> 0;
                case GS_BASE -> {
                    if (!gsRead) {
                        gs = current.get("gs_base");
                        gsRead = true;
                    }
                    yield gs;
                }
                case TASK -> task;     // a task word is read only when word 0 was
                case REGISTER -> 0;    // a register's value, no guest memory (recordedWord never matches it)
            };
            recordedAddress[k] = base + words[k].offset();
        }
    }

    /** Where each captured word of the recorded hit lies (its base at the hit plus its offset). */
    private long[] recordedAddress = new long[0];

    /** The captured word read at {@code address}, {@code size} bytes. */
    private int recordedWord(long address, int size) {
        RecordedProbeHits.Word[] w = recordedWords;
        for (int k = 0; k < w.length; k++) {
            if (recordedAddress[k] == address && w[k].size() == size && w[k].base() != RecordedProbeHits.Base.REGISTER
                    && (w[k].base() != RecordedProbeHits.Base.TASK || recorded.wordRead(0))) return k;
        }
        throw new IllegalStateException("a recorded hit read " + size + " bytes at 0x" + Long.toHexString(address)
                + ", which it did not capture");
    }

    private static IllegalStateException notRecorded(String what) {
        return new IllegalStateException("a recorded hit " + what + ", which it did not capture");
    }

    /**
     * The pages this hit has translated (virtual page → physical page, whether EL0 may read it):
     * the guest does not run during a hit, so its page tables cannot change; a hit reads the
     * current task, its pid and comm and the probe's own memory, mostly on the same few pages.
     * Forgotten at {@link #begin}.
     */
    private static final int PAGES = 8;
    private final long[] pageVa = new long[PAGES], pagePa = new long[PAGES];
    private final boolean[] pageUser = new boolean[PAGES];
    private int pages;
    /**
     * The hit's page-table walker, made at its first translation from the hit's registers
     * ({@link Regs#pageTables()}: during a hit, read with the others in one engine batch).
     */
    private PageTableWalker walker;

    // ---- registers -----------------------------------------------------------------------

    @Override
    public long register(int slot) {
        if (slot < 0 || slot >= slots.length) return 0;
        if (arch == Arch.X86_64 && slot == X86_ORIG_AX) return current.origAx(); // the handler's frame: int3 -1, ftrace 0
        return slots[slot] == null ? 0 : slotValue(slot);
    }

    @Override
    public long stackPointer() { return current.sp(); }

    /**
     * Where register slot {@code slot} lies among the registers of records like {@code hit}'s
     * ({@link RecordedHit#registerIndex}), when {@link #register} reads it there unchanged; else -1.
     */
    public int recordedIndexOfSlot(RecordedHit hit, int slot) {
        if (slot < 0 || slot >= slots.length || slots[slot] == null) return -1;
        if (arch == Arch.X86_64 && slot == X86_ORIG_AX) return -1;
        try {
            return hit.registerIndex(slots[slot]);
        } catch (IllegalStateException e) {
            return -1;
        }
    }

    /**
     * {@link #irqsDisabled} of a record like {@code hit}'s: the index of the flags' register among
     * its registers, the flag's mask, and 1 when the flag set means interrupts off; null when records
     * do not hold it.
     */
    public int[] recordedIrqFlag(RecordedHit hit) {
        int i = recordedIndexOfSlot(hit, arch == Arch.X86_64 ? X86_FLAGS : ARM64_FLAGS);
        if (i < 0) return null;
        return arch == Arch.X86_64 ? new int[] {i, 0x200, 0} : new int[] {i, 0x80, 1};
    }

    /** Interrupts masked in the trapped context: x86 RFLAGS.IF clear, arm64 PSTATE.I set. */
    public boolean irqsDisabled() {
        if (arch == Arch.X86_64) return (slotValue(X86_FLAGS) & 0x200) == 0;
        return (slotValue(ARM64_FLAGS) & 0x80) != 0;
    }

    /** x86-64: GS_BASE at the hit, the per-CPU area's base in the kernel. */
    public long gsBase() {
        if (arch != Arch.X86_64) throw new IllegalStateException("GS_BASE is x86-64's");
        return current.get("gs_base");
    }

    /** x86-64's IA32_KERNEL_GS_BASE: the kernel's GS base while user mode runs (swapgs swaps it in on entry). */
    private static final int MSR_KERNEL_GS_BASE = 0xc000_0102;

    /**
     * x86-64: the kernel's per-CPU base at the hit: GS_BASE in kernel mode; in user mode (a wprobe's
     * hit on a user address) the kernel's base is the one {@code swapgs} keeps in KERNEL_GS_BASE.
     */
    private long kernelPerCpuBase() {
        if ((current.get("cs") & 3) == 3) return machine.engine().msrRead(MSR_KERNEL_GS_BASE);
        return gsBase();
    }

    // ---- memory --------------------------------------------------------------------------

    /** Whether {@code copy_from_kernel_nofault} may read at {@code address}. */
    public boolean kernelAddress(long address) {
        if (arch == Arch.X86_64) return Long.compareUnsigned(address, X86_KERNEL_MIN) >= 0;
        return Long.compareUnsigned(address, ARM64_TASK_SIZE_MAX) >= 0;
    }

    /** Whether {@code access_ok(address, len)} holds. */
    public boolean userRange(long address, long len) {
        long max = arch == Arch.X86_64 ? X86_TASK_SIZE_MAX : ARM64_TASK_SIZE_MAX;
        return Long.compareUnsigned(address, max) <= 0 && Long.compareUnsigned(len, max - address) <= 0;
    }

    @Override
    public long taskSize() { return arch == Arch.X86_64 ? X86_TASK_SIZE_MAX : ARM64_TASK_SIZE_MAX; }

    @Override
    public boolean readKernel(long address, byte[] dst, int offset, int len) {
        if (!kernelAddress(address)) return false;
        if (recorded != null) {
            if (len <= 0) return true;
            int j = recorded.readAt(address, len, false);
            if (j >= 0) {       // a read the site planned: made at the hit, never failed
                recorded.read(j, dst, offset);
                return true;
            }
            int k = recordedWord(address, len);
            if (!recorded.wordRead(k)) return false;
            recorded.word(k, dst, offset);
            return true;
        }
        return read(address, dst, offset, len, false);
    }

    @Override
    public boolean readUser(long address, byte[] dst, int offset, int len) {
        if (!userRange(address, len)) return false;
        if (recorded != null && len > 0) {      // a user read the site planned: made at the hit, never failed
            int j = recorded.readAt(address, len, true);
            if (j < 0) throw notRecorded("read " + len + " bytes of user memory at 0x" + Long.toHexString(address));
            recorded.read(j, dst, offset);
            return true;
        }
        if (read(address, dst, offset, len, true)) return true;
        UserPages f = notPresent;
        return f != null && f.read(address, dst, offset, len);
    }

    /** What a user read that faults would read once Linux's fault handler brought the page in. */
    @FunctionalInterface
    public interface UserPages {
        boolean read(long address, byte[] dst, int offset, int len);
    }

    private UserPages notPresent;

    /**
     * Where a user read finds pages the guest has not faulted in yet (null: nowhere, the read
     * fails). Linux's {@code copy_from_user} in a uprobe handler takes the page fault and reads
     * the page; kpemu, reading from outside, answers from the file a private mapping maps.
     */
    public MachineFetchContext userPages(UserPages pages) {
        this.notPresent = pages;
        return this;
    }

    /** The physical address of {@code va} if readable, else -1. */
    private long physical(long va, boolean user) {
        if (recorded != null) throw notRecorded("translated 0x" + Long.toHexString(va));
        long page = va & ~0xfffL;
        for (int i = 0; i < pages; i++) {
            if (pageVa[i] != page) continue;
            if (user && arch == Arch.ARM64 && !pageUser[i]) return -1;
            return pagePa[i] | (va & 0xfff);
        }
        PageTableWalker.Translation t;
        try {
            if (walker == null) walker = current.pageTables();
            t = walker.translate(va);
        } catch (RuntimeException e) {
            return -1;
        }
        if (t == null) return -1;
        if (user && arch == Arch.ARM64 && !t.user()) return -1;
        if (!machine.memory().isRam(t.physical())) return -1;
        int slot = pages < PAGES ? pages++ : PAGES - 1;
        pageVa[slot] = page;
        pagePa[slot] = t.physical() & ~0xfffL;
        pageUser[slot] = t.user();
        return t.physical();
    }

    private boolean read(long address, byte[] dst, int offset, int len, boolean user) {
        if (len <= 0) return true;
        long lastByte = address + len - 1;
        if (Long.compareUnsigned(lastByte, address) < 0) return false;       // wraps around
        if (((address ^ lastByte) & ~0xfffL) == 0) {                          // one page: one translation
            long pa = physical(address, user);
            if (pa < 0) return false;
            try {
                machine.memory().read(pa, dst, offset, len);
            } catch (RuntimeException e) {
                return false;
            }
            return true;
        }
        // check every page first, so a failed read leaves dst untouched
        long first = address & ~0xfffL, last = lastByte & ~0xfffL;
        for (long p = first; ; p += 0x1000) {
            if (physical(p == first ? address : p, user) < 0) return false;
            if (p == last) break;
        }
        int done = 0;
        try {
            while (done < len) {
                long a = address + done;
                int n = (int) Math.min(len - done, 0x1000 - (a & 0xfff));
                machine.memory().read(physical(a, user), dst, offset + done, n);
                done += n;
            }
        } catch (RuntimeException e) {
            return false;
        }
        return true;
    }

    @Override
    public int readKernelString(long address, byte[] dst, int offset, int max) {
        if (max <= 0) return 0;
        if (!kernelAddress(address)) {
            dst[offset] = 0;
            return -1;
        }
        if (recorded != null) return recordedString(address, false, dst, offset, max);
        return readString(address, dst, offset, max, false);
    }

    @Override
    public int readUserString(long address, byte[] dst, int offset, int max) {
        if (max <= 0) return 0;
        int n = recorded != null ? recordedString(address, true, dst, offset, max) : readString(address, dst, offset, max, true);
        return n == 1 && emptyUserStringFaults ? 0 : n;
    }

    private boolean emptyUserStringFaults;

    /** A string (kernel, or {@code user}) the recorded hit's site planned: read at the hit, its NUL within the record. */
    private int recordedString(long address, boolean user, byte[] dst, int offset, int max) {
        int j = recorded.stringAt(address, user);
        if (j < 0) throw notRecorded("read a " + (user ? "user " : "") + "string at 0x" + Long.toHexString(address));
        return recorded.string(j, dst, offset, Math.min(max, dst.length - offset));
    }

    /**
     * Whether {@link #readUserString} returns 0 for an empty string, as
     * {@code strncpy_from_user_nofault} did before Linux 6.13 ({@link Dialect#emptyUserStringFaults}):
     * the trace then prints {@code (fault)}. Off by default (the string's NUL counts, 1).
     */
    public MachineFetchContext emptyUserStringFaults(boolean on) {
        this.emptyUserStringFaults = on;
        return this;
    }

    /** How much of a string one read copies: most strings a probe fetches are short. */
    private static final int STRING_CHUNK = 128;

    /** {@code strncpy_from_*_nofault}: a chunk at a time (never across a page), stopping at the NUL. */
    private int readString(long address, byte[] dst, int offset, int max, boolean user) {
        max = Math.min(max, dst.length - offset);
        int n = 0;
        try {
            while (n < max) {
                long a = address + n;
                if (user && !userRange(a, 1)) break;
                long pa = physical(a, user);
                int chunk = (int) Math.min(Math.min(max - n, STRING_CHUNK), 0x1000 - (a & 0xfff));
                if (pa >= 0) machine.memory().read(pa, dst, offset + n, chunk);
                // a page the process has not touched: uprobes' strncpy_from_user faults it in
                else if (!user || notPresent == null || !notPresent.read(a, dst, offset + n, chunk)) break;
                for (int i = 0; i < chunk; i++) {
                    if (dst[offset + n + i] == 0) return n + i + 1;
                }
                n += chunk;
            }
        } catch (RuntimeException e) {
            n = -1;
        }
        if (n >= max) {
            dst[offset + max - 1] = 0;
            return max;
        }
        dst[offset] = 0;
        return -1;
    }

    /** Whether the last {@link #kernelValue} read its bytes. */
    private boolean valueRead;

    /**
     * {@code size} (4 or 8) bytes at {@code address} as a little-endian value, as
     * {@link #readKernel} reads them (0 and {@link #valueRead} false when it would fail), without
     * a copy when they lie in one page: the hit's small reads (current, pid, the latency column's
     * counts) read RAM in place.
     */
    long kernelValue(long address, int size) {
        valueRead = false;
        if (!kernelAddress(address)) return 0;
        if (recorded != null) {
            int k = recordedWord(address, size);
            if (!recorded.wordRead(k)) return 0;
            valueRead = true;
            long v = recorded.wordValue(k);
            return size == 8 ? v : v & 0xffff_ffffL;
        }
        if ((address & 0xfff) <= 0x1000 - size) {
            long pa = physical(address, false);
            if (pa < 0) return 0;
            valueRead = true;
            return size == 8 ? machine.memory().readLong(pa) : machine.memory().readInt(pa) & 0xffff_ffffL;
        }
        if (!read(address, word, 0, size, false)) return 0;
        valueRead = true;
        return size == 8 ? le64(word) : (word[0] & 0xff) | (word[1] & 0xff) << 8 | (word[2] & 0xff) << 16 | (word[3] & 0xffL) << 24;
    }

    /** Whether the last {@link #kernelValue} read its bytes. */
    boolean valueRead() { return valueRead; }

    // ---- current task --------------------------------------------------------------------

    /** {@link #currentTask()} read afresh (outside a hit's {@code begin}). */
    public long currentTaskNow() {
        if (recorded != null) {            // the live guest, not the last recorded hit
            recorded = null;
            current = regs;
        }
        taskKnown = false;
        pages = 0;
        walker = null;
        slotsRead = 0;
        return currentTask();
    }

    /** The current {@code struct task_struct *}, or 0 when it cannot be found. */
    public long currentTask() {
        if (taskKnown) return taskPointer;
        taskKnown = true;
        taskPointer = 0;
        if (task == null) return 0;
        try {
            if (arch == Arch.X86_64) {
                long gs = task.gsRelative() ? kernelPerCpuBase() : 0;   // uniprocessor: a plain global
                long v = kernelValue(gs + task.gsOffset(), 8);
                if (valueRead) taskPointer = v;
            } else {
                taskPointer = current.get("sp_el0");
            }
        } catch (RuntimeException e) {
            taskPointer = 0;
        }
        return taskPointer;
    }

    private final byte[] commBuffer = new byte[TaskLayout.COMM_LEN];
    private byte[] lastComm;

    @Override
    public byte[] comm() {
        if (comm != null) return comm;
        long t = currentTask();
        byte[] b = commBuffer;
        if (t == 0 || !readKernel(t + task.commOffset(), b, 0, b.length)) {
            comm = new byte[0];
            return comm;
        }
        int n = 0;
        while (n < b.length - 1 && b[n] != 0) n++;
        // most hits come from the task of the hit before: its array again, no copy
        byte[] last = lastComm;
        if (last != null && last.length == n && Arrays.equals(last, 0, n, b, 0, n)) return comm = last;
        comm = lastComm = Arrays.copyOf(b, n);
        return comm;
    }

    /** {@code current->pid} (the thread id), or 0 when unknown. */
    public int pid() { return field(task == null ? 0 : task.pidOffset()); }

    /** {@code current->tgid} (the process id), or 0 when unknown. */
    public int tgid() { return field(task == null ? 0 : task.tgidOffset()); }

    private int field(long off) {
        long t = currentTask();
        return t == 0 ? 0 : (int) kernelValue(t + off, 4);
    }

    private static long le64(byte[] b) {
        long v = 0;
        for (int i = 7; i >= 0; i--) v = (v << 8) | (b[i] & 0xff);
        return v;
    }

    @Override
    public KernelSymbols symbols() { return symbols; }
}
