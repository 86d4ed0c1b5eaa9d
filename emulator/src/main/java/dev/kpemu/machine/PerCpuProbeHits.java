package dev.kpemu.machine;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntSupplier;

/**
 * The {@link RecordedProbeHits} of a machine of several vCPUs: one {@link NativeProbeHits} ring per
 * vCPU, each filled by its own engine's native hook with that vCPU's registers and instruction
 * clock. What to capture, the sites and the switch go to every vCPU's ring (a vCPU added later
 * gets the same); {@link #setBusy} is the current vCPU's (a hit in flight on one vCPU leaves the
 * others' hits recorded, as Linux's per-CPU {@code current_kprobe} lets them hit). Records are read
 * from the current vCPU's ring: the machine drains it whenever its engine returns, before another
 * vCPU runs, so a record is replayed with the vCPU that hit current ({@link Machine#cpu}).
 */
final class PerCpuProbeHits implements RecordedProbeHits {
    private final List<NativeProbeHits> rings = new ArrayList<>();
    private final IntSupplier current;
    private int[] ids;
    private Word[] words;
    private long[] addresses = new long[0], resume = new long[0];
    private boolean enabled;

    /** @param current the current vCPU's index ({@link Machine#cpu}) */
    PerCpuProbeHits(IntSupplier current) { this.current = current; }

    /** vCPU {@code cpu}'s ring ({@code cpu} is the next index): it records what the others do. */
    void add(int cpu, NativeProbeHits ring) {
        if (cpu != rings.size()) throw new IllegalArgumentException("vCPU " + cpu + " after " + rings.size());
        rings.add(ring);
        if (ids != null) ring.capture(ids, words);
        ring.sites(addresses, resume);
        ring.siteReads(readsOfSite);
        ring.lineFormats(formatBlob, formatOfSite, formatOfCounter);
        ring.returnCounts(trampoline, counts, countsUsed);
        ring.returnTable(table, returns, returnFrame, returnFrameOffset, entryFrame);
        ring.setEnabled(enabled);
    }

    /** The free kretprobe instances every ring takes from: one counter each ({@link #returnInstances}). */
    private final Arena countsArena = Arena.ofShared();
    private MemorySegment counts = MemorySegment.NULL;
    private int countsUsed;
    private long trampoline;

    @Override
    public void returnInstances(long trampoline, int[] free) {
        if (counts.byteSize() < 4L * free.length) counts = countsArena.allocate(4L * Math.max(16, free.length), 4);
        for (int i = 0; i < free.length; i++) counts.set(JAVA_INT, 4L * i, free[i]);
        this.countsUsed = free.length;
        this.trampoline = trampoline;
        for (NativeProbeHits r : rings) r.returnCounts(trampoline, free.length == 0 ? MemorySegment.NULL : counts, free.length);
    }

    @Override
    public void returnInstancesChanged(int counter, int delta) {
        if (counter < 0 || counter >= countsUsed) return;
        long at = 4L * counter;
        counts.set(JAVA_INT, at, counts.get(JAVA_INT, at) + delta);
    }

    /** Instances the table holds (kpemu_probe_hits.h struct kpemu_kret_table: a 16-byte head, 32 bytes an instance). */
    static final int TABLE_INSTANCES = 1024;
    private static final long TABLE_USED = 0, TABLE_CAPACITY = 4, TABLE_COMPLETE = 8, TABLE_SLOTS = 16, INSTANCE_SIZE = 32,
            INSTANCE_FRAME = 0, INSTANCE_TASK = 8, INSTANCE_RET = 16, INSTANCE_COUNTER = 24, INSTANCE_LIVE = 28;
    /** The outstanding instances every ring matches returns in (NULL until {@link #returnsRecorded}), and the counters whose returns it records. */
    private MemorySegment table = MemorySegment.NULL, returns = MemorySegment.NULL;
    private int returnFrame = -1, entryFrame = -1;
    private long returnFrameOffset;

    @Override
    public void returnsRecorded(boolean[] recorded, int returnFrame, long returnFrameOffset, int entryFrame) {
        if (table.equals(MemorySegment.NULL)) {
            table = countsArena.allocate(TABLE_SLOTS + INSTANCE_SIZE * TABLE_INSTANCES, 8);
            table.set(JAVA_INT, TABLE_CAPACITY, TABLE_INSTANCES);
            table.set(JAVA_INT, TABLE_COMPLETE, 1);
        }
        if (returns.byteSize() < 4L * recorded.length) returns = countsArena.allocate(4L * Math.max(16, recorded.length), 4);
        for (int i = 0; i < recorded.length; i++) returns.set(JAVA_INT, 4L * i, recorded[i] ? 1 : 0);
        this.returnFrame = returnFrame;
        this.returnFrameOffset = returnFrameOffset;
        this.entryFrame = entryFrame;
        for (NativeProbeHits r : rings) r.returnTable(table, returns, returnFrame, returnFrameOffset, entryFrame);
    }

    @Override
    public int returnInstanceAdd(long frame, long task, long returnAddress, int counter) {
        if (table.equals(MemorySegment.NULL)) return -1;
        int used = table.get(JAVA_INT, TABLE_USED), slot = 0;
        while (slot < used && table.get(JAVA_INT, instance(slot) + INSTANCE_LIVE) != 0) slot++;
        if (slot >= TABLE_INSTANCES) {
            table.set(JAVA_INT, TABLE_COMPLETE, 0);
            return -1;
        }
        long e = instance(slot);
        table.set(JAVA_LONG, e + INSTANCE_FRAME, frame);
        table.set(JAVA_LONG, e + INSTANCE_TASK, task);
        table.set(JAVA_LONG, e + INSTANCE_RET, returnAddress);
        table.set(JAVA_INT, e + INSTANCE_COUNTER, counter);
        table.set(JAVA_INT, e + INSTANCE_LIVE, 1);
        if (slot >= used) table.set(JAVA_INT, TABLE_USED, slot + 1);
        return slot;
    }

    @Override
    public void returnInstanceRemove(int slot) {
        if (table.equals(MemorySegment.NULL) || slot < 0 || slot >= TABLE_INSTANCES) return;
        table.set(JAVA_INT, instance(slot) + INSTANCE_LIVE, 0);
        int used = table.get(JAVA_INT, TABLE_USED);
        while (used > 0 && table.get(JAVA_INT, instance(used - 1) + INSTANCE_LIVE) == 0) used--;
        table.set(JAVA_INT, TABLE_USED, used);
    }

    @Override
    public void returnInstanceCounter(int slot, int counter) {
        if (table.equals(MemorySegment.NULL) || slot < 0 || slot >= TABLE_INSTANCES) return;
        table.set(JAVA_INT, instance(slot) + INSTANCE_COUNTER, counter);
    }

    @Override
    public void returnInstancesComplete(boolean complete) {
        if (!table.equals(MemorySegment.NULL)) table.set(JAVA_INT, TABLE_COMPLETE, complete ? 1 : 0);
    }

    private static long instance(int slot) { return TABLE_SLOTS + INSTANCE_SIZE * (long) slot; }

    /** The table's slots the native code scans ({@code used}: past the last live one), 0 without a table. */
    int returnTableUsed() { return table.equals(MemorySegment.NULL) ? 0 : table.get(JAVA_INT, TABLE_USED); }

    /** Whether the native code may match returns in the table ({@code complete}). */
    boolean returnTableComplete() { return !table.equals(MemorySegment.NULL) && table.get(JAVA_INT, TABLE_COMPLETE) != 0; }

    /** Slot {@code slot}'s instance as the native code reads it: frame, task, return address, counter, live. */
    long[] returnInstance(int slot) {
        long e = instance(slot);
        return new long[] {table.get(JAVA_LONG, e + INSTANCE_FRAME), table.get(JAVA_LONG, e + INSTANCE_TASK),
                table.get(JAVA_LONG, e + INSTANCE_RET), table.get(JAVA_INT, e + INSTANCE_COUNTER), table.get(JAVA_INT, e + INSTANCE_LIVE)};
    }

    @Override public long returnsRecorded() { return sum(NativeProbeHits::returnsRecorded); }

    private NativeProbeHits mine() {
        int c = current.getAsInt();
        return c < rings.size() ? rings.get(c) : null;
    }

    @Override
    public void capture(int[] ids, Word[] words) {
        for (NativeProbeHits r : rings) r.capture(ids, words);
        this.ids = ids.clone();
        this.words = words.clone();
    }

    @Override
    public void sites(long[] addresses, long[] resume) {
        for (NativeProbeHits r : rings) r.sites(addresses, resume);
        this.addresses = addresses.clone();
        this.resume = resume.clone();
        this.readsOfSite = null;
    }

    private Read[][] readsOfSite;

    @Override
    public void siteReads(Read[][] readsOfSite) {
        for (NativeProbeHits r : rings) r.siteReads(readsOfSite);
        this.readsOfSite = readsOfSite == null ? null : readsOfSite.clone();
    }

    private byte[] formatBlob;
    private int[] formatOfSite;

    private int[] formatOfCounter;

    @Override
    public void lineFormats(byte[] blob, int[] formatOfSite, int[] formatOfCounter) {
        for (NativeProbeHits r : rings) r.lineFormats(blob, formatOfSite, formatOfCounter);
        this.formatBlob = blob == null ? null : blob.clone();
        this.formatOfSite = formatOfSite == null ? null : formatOfSite.clone();
        this.formatOfCounter = formatOfCounter == null ? null : formatOfCounter.clone();
    }

    @Override
    public void returnHead(int slot, int counter, long returnAddress, byte[] head) {
        NativeProbeHits r = mine();
        if (r != null) r.returnHead(slot, counter, returnAddress, head);
    }

    @Override
    public void lineContext(int slot, long[] key, boolean irqsOff, int cls, byte[] columns, boolean taskColumns) {
        NativeProbeHits r = mine();
        if (r != null) r.lineContext(slot, key, irqsOff, cls, columns, taskColumns);
    }

    @Override public long linesFormatted() { return sum(NativeProbeHits::linesFormatted); }

    @Override
    public long lineGeneration() {
        NativeProbeHits r = mine();
        return r == null ? 0 : r.lineGeneration();
    }

    @Override
    public void setEnabled(boolean on) {
        enabled = on;
        for (int i = 0; i < rings.size(); i++) rings.get(i).setEnabled(on);
    }

    @Override
    public void setBusy(boolean busy) {
        NativeProbeHits r = mine();
        if (r != null) r.setBusy(busy);
    }

    @Override public long recorded() { return sum(NativeProbeHits::recorded); }

    /** {@code count} over every vCPU's ring. */
    private long sum(java.util.function.ToLongFunction<NativeProbeHits> count) {
        long n = 0;
        for (NativeProbeHits r : rings) n += count.applyAsLong(r);
        return n;
    }

    @Override
    public void drainTo(Reader consumer) {
        NativeProbeHits r = mine();
        if (r != null) r.drainTo(consumer);
    }

    @Override
    public boolean pending() {
        NativeProbeHits r = mine();
        return r != null && r.pending();
    }

    /** Frees every ring (the machine is closed). */
    void close() {
        for (NativeProbeHits r : rings) r.close();
        countsArena.close();
    }
}
