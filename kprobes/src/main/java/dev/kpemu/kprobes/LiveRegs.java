package dev.kpemu.kprobes;

import java.util.Arrays;

import dev.kpemu.machine.Machine;
import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.unicorn.Unicorn;

/**
 * The vCPU's registers as the arch back ends give them to handlers ({@link Regs}), read and
 * written through to the engine, with one difference while a hit's handlers run
 * ({@link #beginHit} to {@link #endHit}; the guest does not run in between): the registers hits
 * read come from one engine batch, read at the hit's first register read, instead of one engine
 * call each. The batch holds the arch's core set (what every event reads: the flags, what finds
 * the current task, what the page tables are walked from) and every other register a hit has
 * read so far: a register read outside the batch is read on its own once and joins the batch
 * from the next hit on, so the batch is what the registered probes' handlers read (a register
 * costs a batch 4–7 ns and a call of its own about 11, a system register by encoding about 17,
 * measured on arm64: 17 registers 107 ns, 9 plain ones 36 ns).
 *
 * <p>Every write through this object goes to the engine and to the batch's copy, so a handler
 * that writes a register reads back what it wrote. Writes made around this object (the step,
 * simulation, the machine's pc) happen outside the hit's scope, where every read goes to the
 * engine; a nested guest run or a context restore inside a hit (a test's guest call) makes the
 * copy be read again ({@link Unicorn#stateChanges()}).
 *
 * <p>The registers are the <em>current</em> vCPU's ({@link Machine#engine()}: the one whose hook
 * runs): every read and write goes to its engine, and the batch is one per vCPU (a batch is bound
 * to an engine), built on the vCPU's first hit and again when registers join.
 */
public abstract class LiveRegs implements Regs {
    /** Plain engine ids below this may join the batch (Unicorn's x86 and arm64 ids are below it). */
    private static final int MAX_ID = 512;

    private final Machine machine;
    private final int[][] systemRegs;
    /** The batch's plain ids, in order after the system registers. */
    private int[] ids;
    /** Bumped when {@link #ids} changes: a vCPU's batch of an older generation is built again. */
    private int generation;
    /** By vCPU: its batch, the generation and engine it was built for. */
    private Unicorn.RegisterBatch[] batches = new Unicorn.RegisterBatch[1];
    private int[] batchGeneration = new int[1];
    private Unicorn[] batchEngine = new Unicorn[1];
    private long[] values;
    /** By plain engine id: the register's slot in {@link #values}, or -1 (not in the batch). */
    private final int[] slotOf = new int[MAX_ID];
    /** Registers read on their own in a hit, to join the batch before the next one. */
    private int[] joining = new int[0];
    private boolean inHit, loaded;
    /** {@link Unicorn#stateChanges()} when the hit's copy was read or last written through. */
    private long loadedAt;
    private PageTableWalker hitTables;

    /**
     * @param systemRegs arm64 system registers always in the batch, by encoding ({@code {op0,
     *                   op1, CRn, CRm, op2}}), read by {@link #hitSystemRegister}; none on x86
     * @param core       plain engine ids always in the batch
     */
    protected LiveRegs(Machine machine, int[][] systemRegs, int[] core) {
        this.machine = machine;
        this.systemRegs = systemRegs.clone();
        Arrays.fill(slotOf, -1);
        build(core.clone());
    }

    /** The current vCPU's engine. */
    protected final Unicorn uc() { return machine.engine(); }

    private void build(int[] plain) {
        ids = plain;
        generation++;
        values = new long[systemRegs.length + plain.length];
        Arrays.fill(slotOf, -1);
        for (int i = 0; i < plain.length; i++) slotOf[plain[i]] = systemRegs.length + i;
    }

    /** A hit's handlers are about to run: the batch is read at the first register read. */
    public final void beginHit() {
        inHit = true;
        loaded = false;
        hitTables = null;
        if (joining.length > 0) {
            int[] plain = Arrays.copyOf(ids, ids.length + joining.length);
            System.arraycopy(joining, 0, plain, ids.length, joining.length);
            joining = new int[0];
            build(plain);
        }
    }

    /** The hit's handlers are done: reads go to the engine again. */
    public final void endHit() {
        inHit = false;
        loaded = false;
        hitTables = null;
    }

    /** The hit's copy, read again when the CPU state changed around this object (a nested guest run, a context restore). */
    private long[] hitValues() {
        Unicorn uc = uc();
        if (!loaded || loadedAt != uc.stateChanges()) {
            batch(uc).read(values);
            loaded = true;
            loadedAt = uc.stateChanges();
            hitTables = null;
        }
        return values;
    }

    /** The current vCPU's batch of the current ids, built when missing or stale. */
    private Unicorn.RegisterBatch batch(Unicorn uc) {
        int cpu = machine.cpu();
        if (cpu >= batches.length) {
            int n = Math.max(cpu + 1, machine.cpuCount());
            batches = Arrays.copyOf(batches, n);
            batchGeneration = Arrays.copyOf(batchGeneration, n);
            batchEngine = Arrays.copyOf(batchEngine, n);
        }
        Unicorn.RegisterBatch b = batches[cpu];
        if (b == null || batchGeneration[cpu] != generation || batchEngine[cpu] != uc) {
            b = uc.registerBatch(systemRegs, ids);
            batches[cpu] = b;
            batchGeneration[cpu] = generation;
            batchEngine[cpu] = uc;
        }
        return b;
    }

    /** The register {@code id} (a plain engine id). */
    protected final long read(int id) {
        if (!inHit || id < 0 || id >= MAX_ID) return uc().regRead(id);
        int s = slotOf[id];
        if (s >= 0) return hitValues()[s];
        long v = uc().regRead(id);
        for (int j : joining) if (j == id) return v;
        joining = Arrays.copyOf(joining, joining.length + 1);
        joining[joining.length - 1] = id;
        return v;
    }

    /** Writes the register {@code id} to the engine (and to the hit's copy). */
    protected final void write(int id, long value) {
        Unicorn uc = uc();
        boolean current = inHit && loaded && loadedAt == uc.stateChanges();
        uc.regWrite(id, value);
        if (!current) return;
        int s = id >= 0 && id < MAX_ID ? slotOf[id] : -1;
        if (s >= 0) values[s] = value;
        hitTables = null;   // a handler that writes a table register walks the new tables
        loadedAt = uc.stateChanges();
    }

    /**
     * The batch's system register {@code i} (in the order given to the constructor), or
     * {@code Long.MIN_VALUE} outside a hit (the caller reads it itself).
     */
    protected final long hitSystemRegister(int i) {
        if (!inHit || i >= systemRegs.length) return Long.MIN_VALUE;
        return hitValues()[i];
    }

    /** The engine id of a register name, as {@link #get} knows it. */
    protected abstract int id(String name);

    /** {@link #id}, for the engine (the registers a recorded hit captures). */
    final int engineIdOf(String name) { return id(name); }

    /**
     * {@link #id}, remembered by the name's identity (handlers pass the same constant names at
     * every hit) in a small table indexed by the name's hash (a String keeps its hash: no identity
     * hash or boxing per read).
     */
    private int idOf(String name) {
        int i = name.hashCode() & (ID_CACHE - 1);
        if (cachedNames[i] == name) return cachedIds[i];
        int id = id(name);
        cachedNames[i] = name;
        cachedIds[i] = id;
        return id;
    }

    private static final int ID_CACHE = 64;
    private final String[] cachedNames = new String[ID_CACHE];
    private final int[] cachedIds = new int[ID_CACHE];

    @Override public long get(String name) { return read(idOf(name)); }

    @Override public void set(String name, long value) { write(idOf(name), value); }

    /** In a hit, each name as {@link #get} reads it (the batch's copy); outside, one engine batch for the names ({@link RegisterBatches}). */
    @Override
    public void getAll(String[] names, long[] out) {
        if (!inHit) {
            outsideHit(names, out);
            return;
        }
        for (int i = 0; i < names.length; i++) out[i] = read(idOf(names[i]));
    }

    /** {@link #getAll} outside a hit. */
    protected abstract void outsideHit(String[] names, long[] out);

    /** In a hit, the walker made once from the batch's registers; outside, the machine's. */
    @Override
    public final PageTableWalker pageTables() {
        if (!inHit) return currentTables();
        hitValues();   // read again (and the walker dropped) when the CPU state changed around this object
        if (hitTables == null) hitTables = hitTables();
        return hitTables;
    }

    /** The page tables as the machine reads them now. */
    protected abstract PageTableWalker currentTables();

    /** The page tables from the batch's registers (only called in a hit). */
    protected abstract PageTableWalker hitTables();
}
