package dev.kpemu.kprobes;

import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.Map;

import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.unicorn.Unicorn;

/**
 * The vCPU's registers as the arch back ends give them to handlers ({@link Regs}), read and
 * written through to the engine, with one difference while a hit's handlers run
 * ({@link #beginHit} to {@link #endHit}; the guest does not run in between): the registers a hit
 * usually reads — the arch's {@linkplain #LiveRegs hit set}: the arguments, the stack and
 * instruction pointers, the flags, what finds the current task and what the page tables are
 * walked from — come from one engine batch, read at the first use, instead of one engine call
 * each (an FFM downcall and Unicorn's own work: 0.04–0.06 µs a register, 0.1–0.2 µs for a batch
 * of 10–20, {@code kpemu bench unicorn}). Every write through this object goes to the engine and
 * to the batch's copy, so a handler that writes a register reads back what it wrote. Writes made
 * around this object (the step, simulation, the machine's pc) happen outside the hit's scope,
 * where every read goes to the engine.
 */
public abstract class LiveRegs implements Regs {
    protected final Unicorn uc;
    private final Unicorn.RegisterBatch batch;
    private final long[] values;
    /** By plain engine id: the register's slot in {@link #values}, or -1 (not in the hit set). */
    private final int[] slotOf;
    private final int systemRegs;
    private final Map<String[], int[]> namedSlots = new IdentityHashMap<>();
    private boolean inHit, loaded;
    /** {@link Unicorn#stateChanges()} when the hit's copy was read or last written through. */
    private long loadedAt;
    private PageTableWalker hitTables;

    /**
     * @param systemRegs arm64 system registers of the hit set by encoding ({@code {op0, op1, CRn,
     *                   CRm, op2}}), read by {@link #hitSystemRegister}; none on x86
     * @param ids        the hit set's plain engine register ids
     */
    protected LiveRegs(Unicorn uc, int[][] systemRegs, int[] ids) {
        this.uc = uc;
        this.batch = uc.registerBatch(systemRegs, ids);
        this.systemRegs = systemRegs.length;
        this.values = new long[systemRegs.length + ids.length];
        int max = 0;
        for (int id : ids) max = Math.max(max, id);
        this.slotOf = new int[max + 1];
        Arrays.fill(slotOf, -1);
        for (int i = 0; i < ids.length; i++) slotOf[ids[i]] = systemRegs.length + i;
    }

    /** A hit's handlers are about to run: the hit set is read at its first use. */
    public final void beginHit() {
        inHit = true;
        loaded = false;
        hitTables = null;
    }

    /** The hit's handlers are done: reads go to the engine again. */
    public final void endHit() {
        inHit = false;
        loaded = false;
        hitTables = null;
    }

    /** The hit's copy, read again when the CPU state changed around this object (a nested guest run, a context restore). */
    private long[] hitValues() {
        if (!loaded || loadedAt != uc.stateChanges()) {
            batch.read(values);
            loaded = true;
            loadedAt = uc.stateChanges();
            hitTables = null;
        }
        return values;
    }

    private int slot(int id) {
        return inHit && id >= 0 && id < slotOf.length ? slotOf[id] : -1;
    }

    /** The register {@code id} (a plain engine id). */
    protected final long read(int id) {
        int s = slot(id);
        return s >= 0 ? hitValues()[s] : uc.regRead(id);
    }

    /** Writes the register {@code id} to the engine (and to the hit's copy). */
    protected final void write(int id, long value) {
        boolean current = loaded && loadedAt == uc.stateChanges();
        uc.regWrite(id, value);
        if (!current) return;
        int s = slot(id);
        if (s >= 0) values[s] = value;
        hitTables = null;   // a handler that writes a table register walks the new tables
        loadedAt = uc.stateChanges();
    }

    /**
     * The hit set's system register {@code i} (in the order given to the constructor), or
     * {@code Long.MIN_VALUE} outside a hit (the caller reads it itself).
     */
    protected final long hitSystemRegister(int i) {
        if (!inHit || i >= systemRegs) return Long.MIN_VALUE;
        return hitValues()[i];
    }

    /** Whether a hit's handlers are running (the hit set's registers come from its batch). */
    protected final boolean inHit() { return inHit; }

    /** The engine id of a register name, as {@link #get} knows it. */
    protected abstract int id(String name);

    @Override public long get(String name) { return read(id(name)); }

    @Override public void set(String name, long value) { write(id(name), value); }

    /**
     * In a hit, every name of the hit set from the hit's batch (the others one call each);
     * outside, one engine batch for the names ({@link RegisterBatches}).
     */
    @Override
    public void getAll(String[] names, long[] out) {
        if (!inHit) {
            outsideHit(names, out);
            return;
        }
        int[] ids = namedSlots.computeIfAbsent(names, n -> {
            int[] r = new int[n.length];
            for (int i = 0; i < n.length; i++) r[i] = id(n[i]);
            return r;
        });
        for (int i = 0; i < ids.length; i++) out[i] = read(ids[i]);
    }

    /** {@link #getAll} outside a hit. */
    protected abstract void outsideHit(String[] names, long[] out);

    /** In a hit, the walker made once from the hit set's registers; outside, the machine's. */
    @Override
    public final PageTableWalker pageTables() {
        if (!inHit) return currentTables();
        hitValues();   // read again (and the walker dropped) when the CPU state changed around this object
        if (hitTables == null) hitTables = hitTables();
        return hitTables;
    }

    /** The page tables as the machine reads them now. */
    protected abstract PageTableWalker currentTables();

    /** The page tables from the hit set's registers (only called in a hit). */
    protected abstract PageTableWalker hitTables();
}
