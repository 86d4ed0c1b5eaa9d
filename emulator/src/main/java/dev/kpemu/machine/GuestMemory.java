package dev.kpemu.machine;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import dev.kpemu.unicorn.Unicorn;

/**
 * Guest-physical memory: named RAM regions mapped into the engines it serves, plus the MMIO windows
 * the device bus maps. All addresses here are physical; virtual access goes through
 * {@link Machine#readVirtual}/{@link Machine#writeVirtual}.
 *
 * <p>It serves the machine's engine and every engine that joined it ({@link Machine#openSecondaryEngine}):
 * each RAM region is the same host memory ({@link HostRam}) mapped into each of them with
 * {@code uc_mem_map_ptr}, a region added later is mapped into every engine and an engine that
 * joins later gets every region; the regions' list, MMIO windows included, is the one memory map
 * of them all. The host's own reads and writes go through the first engine (or host memory in
 * place), which every engine sees: they share the bytes. Translated code is per engine:
 * {@link Machine#invalidateCode} drops it in each.
 */
public final class GuestMemory {
    private final Unicorn uc;
    /** The engines this memory is mapped into: {@link #uc} first, then those that joined. */
    private final List<Unicorn> engines = new ArrayList<>();
    private final List<MemoryRegion> regions = new ArrayList<>();
    private TextGuard guard;
    /** Pages (physical address / 4096) the host has written through this object. */
    private final java.util.BitSet hostWritten = new java.util.BitSet();
    /** The host memory of each RAM region, in {@link #regions} order of the RAM ones: reads go straight to it. */
    private final List<HostRam> ram = new ArrayList<>();
    private long[] ramBase = new long[0], ramEnd = new long[0];
    private MemorySegment[] ramSegment = new MemorySegment[0];

    GuestMemory(Unicorn uc) {
        this.uc = uc;
        engines.add(uc);
    }

    /** The engines this memory is mapped into, the machine's first. */
    List<Unicorn> engines() { return Collections.unmodifiableList(engines); }

    /**
     * Maps every RAM region into {@code engine}, which from then on is served as the first one:
     * regions added later are mapped into it too. On failure nothing is recorded (the caller
     * closes the engine, which drops what was mapped).
     */
    void join(Unicorn engine) {
        if (engines.contains(engine)) throw new IllegalArgumentException("engine already joined");
        for (int i = 0; i < ramBase.length; i++) engine.memMapPtr(ramBase[i], ramEnd[i] - ramBase[i], Unicorn.PROT_ALL, ramSegment[i]);
        engines.add(engine);
    }

    /** Stops serving {@code engine} (a join the caller undoes; the engine is closed next). */
    void leave(Unicorn engine) {
        if (engine != uc) engines.remove(engine);
    }

    /** Host writes from now on update {@code g}'s expected bytes. */
    void observeWrites(TextGuard g) { this.guard = g; }

    /**
     * Maps {@code size} bytes of zeroed RAM at {@code base} (both page-aligned): host memory
     * ({@link HostRam}) every engine served runs on and the host reads in place; the host's writes
     * still go through the engine's memory API (translated code they change is dropped by
     * {@link Machine#invalidateCode}, as before).
     */
    public MemoryRegion addRam(String name, long base, long size) {
        checkFree(name, base, size);
        HostRam host = HostRam.allocate(size);
        int mapped = 0;
        try {
            for (Unicorn e : engines) {
                e.memMapPtr(base, size, Unicorn.PROT_ALL, host.segment());
                mapped++;
            }
        } catch (RuntimeException e) {
            for (int k = 0; k < mapped; k++) engines.get(k).memUnmap(base, size);
            host.close();
            throw e;
        }
        ram.add(host);
        int n = ramBase.length;
        ramBase = java.util.Arrays.copyOf(ramBase, n + 1);
        ramEnd = java.util.Arrays.copyOf(ramEnd, n + 1);
        ramSegment = java.util.Arrays.copyOf(ramSegment, n + 1);
        ramBase[n] = base;
        ramEnd[n] = base + size;
        ramSegment[n] = host.segment();
        MemoryRegion r = new MemoryRegion(name, base, size, MemoryRegion.Kind.RAM);
        regions.add(r);
        return r;
    }

    /** How many RAM regions there are (regions are only added, never removed, until {@link #close}). */
    public int ramRegionCount() { return ramBase.length; }

    /** RAM region {@code i}'s guest-physical base, in the order they were added. */
    public long ramBase(int i) { return ramBase[i]; }

    /**
     * RAM region {@code i}'s host memory (valid until the machine is closed): for kpemu's native
     * hooks, which read guest RAM in place.
     */
    public MemorySegment ramHost(int i) { return ramSegment[i]; }

    /** The index of the RAM region holding {@code [pa, pa + len)} whole, or -1. */
    private int ramIndex(long pa, long len) {
        for (int i = 0; i < ramBase.length; i++) {
            if (Long.compareUnsigned(pa, ramBase[i]) >= 0 && Long.compareUnsigned(pa, ramEnd[i]) < 0)
                return len <= ramEnd[i] - pa ? i : -1;
        }
        return -1;
    }

    /** Releases the host memory; only after every engine served is closed ({@link Machine#close}). */
    void close() {
        for (HostRam h : ram) h.close();
        ram.clear();
        ramBase = new long[0];
        ramEnd = new long[0];
        ramSegment = new MemorySegment[0];
    }

    /** Records an MMIO window in the memory map; the {@link DeviceBus} maps it into every engine served. */
    void addMmio(String name, long base, long size) {
        checkFree(name, base, size);
        regions.add(new MemoryRegion(name, base, size, MemoryRegion.Kind.MMIO));
    }

    private void checkFree(String name, long base, long size) {
        if ((base & 0xfff) != 0 || (size & 0xfff) != 0 || size <= 0) {
            throw new IllegalArgumentException(name + ": region must be page-aligned and non-empty");
        }
        for (MemoryRegion r : regions) {
            if (Long.compareUnsigned(base, r.end()) < 0 && Long.compareUnsigned(r.base(), base + size) < 0) {
                throw new IllegalArgumentException(name + " overlaps " + r.name());
            }
        }
    }

    public List<MemoryRegion> regions() { return Collections.unmodifiableList(regions); }

    /** Whether {@code pa} is in RAM (as {@code regionAt(pa).kind() == RAM}, without the regions' list: a page walk asks per level). */
    public boolean isRam(long pa) { return ramIndex(pa, 1) >= 0; }

    /** The region holding {@code pa}, or null. */
    public MemoryRegion regionAt(long pa) {
        for (MemoryRegion r : regions) if (r.contains(pa)) return r;
        return null;
    }

    public MemoryRegion region(String name) {
        for (MemoryRegion r : regions) if (r.name().equals(name)) return r;
        throw new IllegalArgumentException("no memory region named " + name);
    }

    public byte[] read(long pa, int len) {
        byte[] b = new byte[len];
        read(pa, b, 0, len);
        return b;
    }

    public void read(long pa, byte[] dst, int off, int len) {
        int i = ramIndex(pa, len);
        if (i >= 0) MemorySegment.copy(ramSegment[i], pa - ramBase[i], arraySegment(dst), off, len);
        else uc.memRead(pa, dst, off, len);
    }

    /** An array {@link #read} filled, as a segment; one immutable pair, so any thread sees a matching one. */
    private record ArraySegment(byte[] array, MemorySegment segment) {}
    /** The arrays of the last reads, as segments (a hit reads into a few buffers by turns: comm, a word, the fetch buffer). */
    private final ArraySegment[] lastArrays = new ArraySegment[4];
    private int nextArray;

    /**
     * {@code dst} as a heap segment, the one of an earlier read when it is the same array (the probe
     * path reads the current task's {@code comm}, the latency column's words and the fetches' values
     * into buffers it reuses): a copy between two segments, where {@code MemorySegment.copy} into an
     * {@code Object} array looks the array's type and length up reflectively on every call under the
     * client compiler (the launcher's; half a microsecond of each job event's {@code comm},
     * docs/reference.md).
     */
    private MemorySegment arraySegment(byte[] dst) {
        ArraySegment[] cache = lastArrays;
        for (ArraySegment a : cache) if (a != null && a.array() == dst) return a.segment();
        ArraySegment a = new ArraySegment(dst, MemorySegment.ofArray(dst));
        int i = nextArray;
        cache[i] = a;
        nextArray = (i + 1) & (cache.length - 1);
        return a.segment();
    }

    public void write(long pa, byte[] src) {
        uc.memWrite(pa, src);
        afterHostWrite(pa, src.length);
    }

    public void write(long pa, byte[] src, int off, int len) {
        uc.memWrite(pa, src, off, len);
        afterHostWrite(pa, len);
    }

    /**
     * The {@code size} (1-8) bytes at {@code pa} as a little-endian value, read in host RAM in place
     * (0 for bytes outside RAM): a watchpoint's old value, from inside an engine callback.
     */
    long readInPlace(long pa, int size) {
        long v = 0;
        for (int k = 0; k < size; k++) {
            int i = ramIndex(pa + k, 1);
            if (i >= 0) v |= (ramSegment[i].get(ValueLayout.JAVA_BYTE, pa + k - ramBase[i]) & 0xffL) << (8 * k);
        }
        return v;
    }

    /**
     * Stores the low {@code size} (1-8) bytes of {@code value} at {@code pa} in host RAM in place, as the
     * guest's own store would (a write-watched page's store, which the engine discards: {@link Watchpoints}).
     */
    void storeInPlace(long pa, int size, long value) {
        for (int k = 0; k < size; k++) {
            int i = ramIndex(pa + k, 1);
            if (i >= 0) ramSegment[i].set(ValueLayout.JAVA_BYTE, pa + k - ramBase[i], (byte) (value >>> (8 * k)));
        }
    }

    public long readLong(long pa) {
        int i = ramIndex(pa, 8);
        return i >= 0 ? ramSegment[i].get(ValueLayout.JAVA_LONG_UNALIGNED, pa - ramBase[i]) : uc.memReadLong(pa);
    }

    public int readInt(long pa) {
        int i = ramIndex(pa, 4);
        return i >= 0 ? ramSegment[i].get(ValueLayout.JAVA_INT_UNALIGNED, pa - ramBase[i]) : uc.memReadInt(pa);
    }

    public void writeLong(long pa, long v) {
        uc.memWriteLong(pa, v);
        afterHostWrite(pa, 8);
    }

    /**
     * Writes a long the guest uses as data only — a kernel stack slot below the stack pointer, where
     * the call at a probed ftrace site pushes its return address — in host RAM in place, without
     * Unicorn's write path (an engine call that also looks for translated code of the bytes written
     * to drop). A live kernel stack holds no code to drop: stacks are mapped non-executable, and
     * code later placed in the page is written there by the guest, whose stores drop translated code
     * of every byte they change. Outside RAM: {@link #writeLong}.
     */
    public void writeStackLong(long pa, long v) {
        int i = ramIndex(pa, 8);
        if (i < 0) {
            writeLong(pa, v);
            return;
        }
        ramSegment[i].set(ValueLayout.JAVA_LONG_UNALIGNED, pa - ramBase[i], v);
        afterHostWrite(pa, 8);
    }

    public void writeInt(long pa, int v) {
        uc.memWriteInt(pa, v);
        afterHostWrite(pa, 4);
    }

    /**
     * Zeroes whole pages ({@code pa}, {@code len} page-aligned) the guest has not run on: in host
     * RAM by handing them back to the host's kernel ({@link HostRam#discard}: no copying, and they
     * no longer count in the process's memory), elsewhere by writing zeros. Only before the guest
     * first runs (a snapshot's restore): translated code of these pages is not dropped.
     */
    public void zeroUnrunPages(long pa, long len) {
        if ((pa & 0xfff) != 0 || (len & 0xfff) != 0 || len <= 0) throw new IllegalArgumentException("not whole pages");
        int i = ramIndex(pa, len);
        if (i < 0) {
            byte[] zero = new byte[4096];
            for (long p = pa; p < pa + len; p += 4096) write(p, zero);
            return;
        }
        ram.get(i).discard(pa - ramBase[i], len);
        hostWritten.clear((int) (pa >>> 12), (int) ((pa + len - 1) >>> 12) + 1);
        if (guard != null) guard.afterHostWrite(pa, (int) Math.min(len, Integer.MAX_VALUE));
    }

    /** What follows every host write: the page marked host-written (snapshots), the text guard told. */
    private void afterHostWrite(long pa, int len) {
        markWritten(pa, len);
        if (guard != null) guard.afterHostWrite(pa, len);
    }

    private void markWritten(long pa, int len) {
        if (len <= 0) return;
        hostWritten.set((int) (pa >>> 12), (int) ((pa + len - 1) >>> 12) + 1);
    }

    /**
     * Whether the host has written the page at {@code pa} through this object (the guest's own
     * stores are not seen): before the guest first runs, every other page of RAM reads zero.
     */
    public boolean hostWrote(long pa) { return hostWritten.get((int) (pa >>> 12)); }
}
