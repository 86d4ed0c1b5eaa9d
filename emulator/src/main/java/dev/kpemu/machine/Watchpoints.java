package dev.kpemu.machine;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.IntSupplier;

import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * Data watchpoints on guest-physical ranges, in every engine of the machine, outside the guest:
 * any number, any length, reads, writes or both; the guest's own debug registers are untouched.
 * The mechanism, chosen by measurement (docs/watchpoint-notes.md, {@code WatchMechanismFactsTest}):
 *
 * <ul>
 * <li><b>Writes</b>: the pages holding a watched range (and the page before it when the range
 * starts within {@link #CROSSING_REACH} bytes of its page, so a store crossing into it arrives
 * whole) are made read-only in every engine ({@code uc_mem_protect}; RAM stays the same host
 * memory). Loads and every other page keep the engine's fast path; a store to such a page calls
 * one {@code UC_HOOK_MEM_WRITE_PROT} hook with the physical address, size and value and the pc
 * synced to the storing instruction. The engine then <em>discards</em> the store (a handled store
 * to read-only memory is ignored), so the hook performs it itself in host RAM, reporting it when
 * it overlaps a watched range. Atomics (x86 {@code lock}, {@code cmpxchg}; arm64 exclusive pairs)
 * and string instructions arrive here too (measured). A page-crossing store arrives whole first
 * and then byte by byte for the bytes on read-only pages (the engine's unaligned path); those
 * byte calls are performed and not reported again.</li>
 * <li><b>Reads</b>: a read-only page does not catch loads (only the first one, which fills the
 * TLB), so reads take a {@code UC_HOOK_MEM_READ} hook bounded to the read watches. Its mere
 * existence sends every load and store of every block translated meanwhile through the engine's
 * slow path (measured: the cost is in the notes); it exists only while a read watch does, and
 * adding or removing it drops every engine's translations.</li>
 * </ul>
 *
 * <b>One instruction that reads and writes is one hit</b> for a watch on both (x86's DR7 RW=11
 * traps once per instruction; gdb's {@code awatch} reports a write, old and new value): a read
 * hit of such a watch is held; a write at the same pc by the same engine overlapping the read
 * replaces it. Anything else flushes it as a read, in the guest's order: the next access of any
 * engine, and the end of the block (a held read ends the slice there; {@link #flushHeldReads}).
 *
 * Host accesses do not count: kpemu reads guest RAM in place and writes it through
 * {@code uc_mem_write}, which neither hook sees. Handlers run inside the engine's memory callback:
 * they must not stop the engine themselves (they ask {@link #stopAt} or {@link #stopBefore}), run
 * guest code, or add or remove watches; watches are added and removed between runs (a host breakpoint's action is between
 * runs), since a page's permissions change the engine's memory map.
 */
public final class Watchpoints {
    /** How far below a watched range a store may start and still reach it: the widest store the engine makes whole (8 bytes), with room. */
    public static final int CROSSING_REACH = 64;
    private static final long PAGE = 4096;

    /** A watched physical range. */
    public static final class Watch {
        private final long start, end;
        private final boolean reads, writes, afterAccess;
        private final Consumer<WatchHit> handler;
        /** A guest debug register's watch ({@link #addTrapping}): told first, may trap the store. */
        private boolean trapping;

        private Watch(long start, long end, boolean reads, boolean writes, boolean afterAccess, Consumer<WatchHit> handler) {
            this.start = start;
            this.end = end;
            this.reads = reads;
            this.writes = writes;
            this.afterAccess = afterAccess;
            this.handler = handler;
        }

        public long start() { return start; }
        public long length() { return end - start; }
        public boolean reads() { return reads; }
        public boolean writes() { return writes; }
        /** Whether the handler sees a store after it is made (as x86's data breakpoints report), not before. */
        public boolean afterAccess() { return afterAccess; }

        boolean overlaps(long pa, int size) { return pa < end && start < pa + size; }
    }

    private final GuestMemory memory;
    private final IntSupplier currentCpu;
    private final List<Watch> watches = new ArrayList<>();
    /** Write-protected pages (physical page number) and how many write watches need each. */
    private final Map<Long, Integer> protectedPages = new HashMap<>();
    private final Map<Unicorn, Unicorn.Hook> readHooks = new HashMap<>();
    private final Map<Unicorn, Unicorn.Hook> writeHooks = new HashMap<>();
    /** The page-crossing store being completed byte by byte: its engine, pc and physical range. */
    private Unicorn crossingEngine;
    private long crossingPc, crossingStart, crossingEnd;

    private final BiConsumer<Unicorn, Runnable> mapChange;
    private final Consumer<StopReason> stopSoon;
    private final BiConsumer<Unicorn, StopReason> stopNow;
    private final Runnable endSliceSoon;
    /** Read hits held for watches on reads and writes, made by {@link #heldEngine} at {@link #heldPc}. */
    private final List<WatchHit> heldReads = new ArrayList<>();
    private Unicorn heldEngine;
    private long heldPc;

    /**
     * {@code mapChange}: applies a change to an engine's memory map as {@link Machine#changeMemoryMap}
     * does; {@code stopSoon}: ends the run at the next block boundary with a reason, safely from a
     * memory callback; {@code stopNow}: records the reason and stops the engine inside the callback
     * (the instruction is then made again by the next run); {@code endSliceSoon}: ends the run's
     * slice at the next block boundary, after which the machine calls {@link #flushHeldReads}.
     */
    Watchpoints(GuestMemory memory, IntSupplier currentCpu, BiConsumer<Unicorn, Runnable> mapChange, Consumer<StopReason> stopSoon,
                BiConsumer<Unicorn, StopReason> stopNow, Runnable endSliceSoon) {
        this.endSliceSoon = endSliceSoon;
        this.memory = memory;
        this.currentCpu = currentCpu;
        this.mapChange = mapChange;
        this.stopSoon = stopSoon;
        this.stopNow = stopNow;
    }

    /**
     * From a handler: stops the guest after {@code hit}. The engine cannot stop inside the access (a
     * stop from a memory callback makes it run the instruction again), so the run returns
     * {@link StopReason.Watchpoint} at the end of the translated block that made the access: the
     * access is done, and so are the block's instructions after it (a block ends at a branch).
     */
    public void stopAt(WatchHit hit) {
        stopSoon.accept(new StopReason.Watchpoint(hit));
    }

    /**
     * From a handler of a write: stops the guest <em>before</em> the store of {@code hit}, as an
     * arm64 watchpoint does: the store is not made, the run returns {@link StopReason.Watchpoint}
     * with the pc at the storing instruction and nothing of that instruction done (the engine
     * replays it: {@code WatchMechanismFactsTest.stoppingInTheWriteProtectHookStopsBeforeTheStore}).
     * The next run makes the store without reporting it again. A page-crossing store's bytes on a
     * page that is not read-only are made by the engine all the same. The instruction clock
     * charged the whole block at its start; the rest of it is charged again when it runs.
     */
    public void stopBefore(WatchHit hit) {
        if (!hit.write()) throw new IllegalArgumentException("only a write can be stopped before (reads are seen by a hook that cannot stop)");
        if (hit.watch().afterAccess()) throw new IllegalArgumentException("a watch reporting after the access cannot stop before it");
        stopBeforeRequested = hit;
    }

    /**
     * From the handler of an {@link #addTrapping} watch: the store is not made, the engine stops
     * with the pc at the storing instruction, and the run goes on (no {@link StopReason}, only the
     * slice ends), so that the machine takes the guest's exception at that instruction before the
     * next slice (arm64's guest watchpoints, {@code Arm64DebugRegisters}); no other watch is told
     * of this attempt, and its next execution is a new access for every watch.
     */
    public void trapBefore(WatchHit hit) {
        stopBefore(hit);
        trapOnly = true;
    }

    /** The hit a handler asked to stop before ({@link #stopBefore}), during {@link #report}. */
    private WatchHit stopBeforeRequested;
    /** The stop asked for is {@link #trapBefore}'s: the engine stops, the run does not. */
    private boolean trapOnly;
    /** The store stopped before, let through without a report when the engine makes it again. */
    private Unicorn replayEngine;
    private long replayPc, replayPa;
    private int replaySize;

    /**
     * Watches {@code [pa, pa + length)} (physical, in RAM) for the guest's reads and/or writes;
     * {@code handler} gets each access that overlaps it, from inside the engine's memory callback.
     */
    public Watch add(long pa, long length, boolean reads, boolean writes, Consumer<WatchHit> handler) {
        return add(pa, length, reads, writes, false, handler);
    }

    /**
     * As {@link #add(long, long, boolean, boolean, Consumer)}; with {@code afterAccess} the handler
     * of a store runs once the store is made in RAM (what x86's trap-after data breakpoints let a
     * handler read; a page-crossing store's bytes past its first page are made just after), and
     * cannot {@link #stopBefore} it. A read's handler runs before the load either way (the value
     * is the same).
     */
    public Watch add(long pa, long length, boolean reads, boolean writes, boolean afterAccess, Consumer<WatchHit> handler) {
        if (length <= 0) throw new IllegalArgumentException("a watched range is at least 1 byte long");
        if (!reads && !writes) throw new IllegalArgumentException("a watch is on reads, writes or both");
        if (!memory.isRam(pa) || !memory.isRam(pa + length - 1))
            throw new IllegalArgumentException("watched range 0x" + Long.toHexString(pa) + "+" + length + " is not in RAM");
        Watch w = new Watch(pa, pa + length, reads, writes, afterAccess, handler);
        watches.add(w);
        if (writes) {
            protect(writePages(w), +1);
            rehookWrites();
        }
        if (reads) rehookReads();
        return w;
    }

    /**
     * A write watch for the guest's own watchpoint registers (arm64's, taken before the access): its
     * handler is told of a store before every other watch and may call {@link #trapBefore}; then
     * the store is not made and no other watch is told of it (the guest takes its exception; the
     * instruction, executed again after the guest's handler, is a new access for every watch).
     */
    public Watch addTrapping(long pa, long length, Consumer<WatchHit> handler) {
        Watch w = add(pa, length, false, true, false, handler);
        w.trapping = true;
        return w;
    }

    /** Stops watching {@code w} (its pages go back to read-write when no other write watch needs them). */
    public void remove(Watch w) {
        if (!watches.remove(w)) return;
        heldReads.removeIf(h -> h.watch() == w);
        if (w.writes) {
            protect(writePages(w), -1);
            rehookWrites();
        }
        if (w.reads) rehookReads();
    }

    public List<Watch> list() { return List.copyOf(watches); }

    /** The pages a write watch makes read-only: its own, and the one before when a store crossing into it could start there. */
    private List<Long> writePages(Watch w) {
        List<Long> pages = new ArrayList<>();
        long first = Math.max(0, w.start - CROSSING_REACH) / PAGE;
        if (!memory.isRam(first * PAGE)) first = w.start / PAGE;
        for (long p = first; p <= (w.end - 1) / PAGE; p++) pages.add(p);
        return pages;
    }

    /** Counts {@code pages} needed once more or once less, and changes those whose state flips, in one map change per engine. */
    private void protect(List<Long> pages, int delta) {
        List<Long> flipped = new ArrayList<>();
        for (long page : pages) {
            int n = protectedPages.getOrDefault(page, 0) + delta;
            if (n > 0) protectedPages.put(page, n);
            else protectedPages.remove(page);
            if ((n - delta > 0) != (n > 0)) flipped.add(page);
        }
        if (flipped.isEmpty()) return;
        for (Unicorn e : memory.engines()) protectPages(e, flipped, delta > 0);
    }

    /**
     * Changes pages' permissions in {@code e}, in one map change. {@code uc_mem_protect} splits the RAM region (an
     * unmap and new {@code uc_mem_map_ptr} mappings of the same host memory) but flushes TLB entries
     * only by the region's <em>physical</em> addresses taken as virtual ones: with paging on, the
     * guest's own entries survive. Hence {@link Machine#changeMemoryMap}: the whole TLB, the
     * translated code and the vCPU's block cache dropped, the CPU state kept.
     */
    private void protectPages(Unicorn e, java.util.Collection<Long> pages, boolean readOnly) {
        mapChange.accept(e, () -> {
            for (long page : pages) e.memProtect(page * PAGE, PAGE, readOnly ? Unicorn.PROT_READ | Unicorn.PROT_EXEC : Unicorn.PROT_ALL);
        });
    }

    /** Hooks {@code engine} (one that joined the machine) as the others: its read-only pages and its hooks. */
    void join(Unicorn engine) {
        if (!protectedPages.isEmpty()) protectPages(engine, protectedPages.keySet(), true);
        rehookWrites();
        rehookReads();
    }

    /**
     * Replaces every engine's write hook by one bounded to the read-only pages now (none without
     * them). Bounded, not over all memory: a memory hook whose range holds an address also makes the
     * engine keep that page's TLB entries "not dirty" and skip its translation-time TLB walk there.
     * The hook is looked up when a store reaches a read-only page, not at translation, so it may
     * come and go without dropping translated code.
     */
    private void rehookWrites() {
        long lo = Long.MAX_VALUE, hi = Long.MIN_VALUE;
        for (long p : protectedPages.keySet()) {
            lo = Math.min(lo, p * PAGE);
            hi = Math.max(hi, p * PAGE + PAGE - 1);
        }
        for (Unicorn e : memory.engines()) {
            Unicorn.Hook old = writeHooks.remove(e);
            if (old != null) e.delete(old);
            if (lo <= hi) {
                int pcReg = pcRegister(e);
                writeHooks.put(e, e.hookMemoryEvent(Unicorn.HOOK_MEM_WRITE_PROT, lo, hi,
                        (u, type, pa, size, value) -> onProtectedStore(u, pcReg, pa, size, value)));
            }
        }
    }

    private static int pcRegister(Unicorn e) { return e.arch() == Unicorn.ARCH_X86 ? X86Reg.RIP : Arm64Reg.PC; }

    private boolean onProtectedStore(Unicorn u, int pcReg, long pa, int size, long value) {
        long pc = u.regRead(pcReg);
        boolean recursion = size == 1 && u == crossingEngine && pc == crossingPc && pa >= crossingStart && pa < crossingEnd;
        long inPage = Math.min(size, PAGE - (pa & (PAGE - 1)));
        if (recursion) {
            if (!crossingDiscarded) memory.storeInPlace(pa, 1, value);
            return true;
        }
        crossingEngine = null;
        takeHeldReadsOf(u, pc, pa, size);
        if (u == replayEngine && pc == replayPc && pa == replayPa && size == replaySize) {
            replayEngine = null;            // the store stopped before, made now
            long before = memory.readInPlace(pa, size);
            memory.storeInPlace(pa, (int) inPage, value);
            report(pa, size, true, before, value, pc, true);
            return true;
        }
        long old = memory.readInPlace(pa, size);
        stopBeforeRequested = null;
        trapOnly = false;
        reportTrapping(pa, size, old, value, pc);
        if (!trapOnly) report(pa, size, true, old, value, pc, false);
        WatchHit stop = stopBeforeRequested;
        boolean trap = trapOnly;
        stopBeforeRequested = null;
        trapOnly = false;
        if (inPage < size) {
            crossingEngine = u;
            crossingPc = pc;
            crossingStart = pa;
            crossingEnd = pa + size;
            crossingDiscarded = stop != null;
        }
        if (stop != null && trap) {
            stopNow.accept(u, null);        // the guest's exception is taken before the store: no replay is owed
            return true;
        }
        if (stop != null) {
            replayEngine = u;
            replayPc = pc;
            replayPa = pa;
            replaySize = size;
            stopNow.accept(u, new StopReason.Watchpoint(stop));
            return true;                    // handled, so discarded: not made
        }
        memory.storeInPlace(pa, (int) inPage, value);
        report(pa, size, true, old, value, pc, true);
        return true;
    }

    /** Whether the crossing store's byte calls are discarded (a stop before it), not made. */
    private boolean crossingDiscarded;

    /** Reports an access to the watches it overlaps whose handlers run {@code after} it (reads: every watch, {@code after} ignored). */
    private void report(long pa, int size, boolean write, long old, long value, long pc, boolean after) {
        for (Watch w : List.copyOf(watches)) {
            if (w.trapping || (write && w.afterAccess != after)) continue;
            if ((write ? w.writes : w.reads) && w.overlaps(pa, size))
                w.handler.accept(new WatchHit(w, currentCpu.getAsInt(), pc, pa, size, write, old, value));
        }
    }

    /** A store, to the guest debug registers' watches ({@link #addTrapping}) only: they may trap it. */
    private void reportTrapping(long pa, int size, long old, long value, long pc) {
        for (Watch w : List.copyOf(watches)) {
            if (w.trapping && w.overlaps(pa, size))
                w.handler.accept(new WatchHit(w, currentCpu.getAsInt(), pc, pa, size, true, old, value));
            if (trapOnly) return;
        }
    }

    /** A load: reported to read-only watches, held for watches on reads and writes (the same instruction may store next). */
    private void onRead(Unicorn u, long pc, long pa, int size) {
        flushHeldReads();
        long v = memory.readInPlace(pa, size);
        for (Watch w : List.copyOf(watches)) {
            if (!w.reads || !w.overlaps(pa, size)) continue;
            WatchHit hit = new WatchHit(w, currentCpu.getAsInt(), pc, pa, size, false, v, v);
            if (w.writes) heldReads.add(hit);
            else w.handler.accept(hit);
        }
        if (!heldReads.isEmpty()) {
            heldEngine = u;
            heldPc = pc;
            endSliceSoon.run();
        }
    }

    /**
     * Before a store by {@code u} at {@code pc}: drops the held reads it makes one hit with (same
     * engine and pc, overlapping the read, in the same watch: the store's report is that hit) and
     * flushes the others.
     */
    private void takeHeldReadsOf(Unicorn u, long pc, long pa, int size) {
        if (heldReads.isEmpty()) return;
        if (u == heldEngine && pc == heldPc)
            heldReads.removeIf(h -> h.physicalAddress() < pa + size && pa < h.physicalAddress() + h.size() && h.watch().overlaps(pa, size));
        flushHeldReads();
    }

    /**
     * Reports the held reads as reads, in the order made. The machine calls it when a slice ends
     * (a held read asks for the end of its block), so no held read outlives its block or the run.
     */
    void flushHeldReads() {
        if (heldReads.isEmpty()) return;
        List<WatchHit> held = List.copyOf(heldReads);
        heldReads.clear();
        heldEngine = null;
        for (WatchHit h : held) h.watch().handler.accept(h);
    }

    /** Replaces every engine's read hook by one bounded to the read watches now (none without them), dropping translations. */
    private void rehookReads() {
        long lo = Long.MAX_VALUE, hi = Long.MIN_VALUE;
        for (Watch w : watches) {
            if (!w.reads) continue;
            lo = Math.min(lo, Math.max(0, w.start - CROSSING_REACH));
            hi = Math.max(hi, w.end - 1);
        }
        for (Unicorn e : memory.engines()) {
            Unicorn.Hook old = readHooks.remove(e);
            if (old != null) e.delete(old);
            if (lo <= hi) {
                int pcReg = pcRegister(e);
                readHooks.put(e, e.hookMemory(Unicorn.HOOK_MEM_READ, lo, hi, (u, type, pa, size, value) -> onRead(u, u.regRead(pcReg), pa, size)));
            }
            if (old != null || lo <= hi) mapChange.accept(e, () -> { });
        }
    }
}
