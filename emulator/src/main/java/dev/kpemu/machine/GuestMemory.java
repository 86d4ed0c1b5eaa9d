package dev.kpemu.machine;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import dev.kpemu.unicorn.Unicorn;

/**
 * Guest-physical memory: named RAM regions mapped into the engine, plus the MMIO windows the
 * device bus maps. All addresses here are physical; virtual access goes through
 * {@link Machine#readVirtual}/{@link Machine#writeVirtual}.
 */
public final class GuestMemory {
    private final Unicorn uc;
    private final List<MemoryRegion> regions = new ArrayList<>();
    private TextGuard guard;
    /** Pages (physical address / 4096) the host has written through this object. */
    private final java.util.BitSet hostWritten = new java.util.BitSet();

    GuestMemory(Unicorn uc) { this.uc = uc; }

    /** Host writes from now on update {@code g}'s expected bytes. */
    void observeWrites(TextGuard g) { this.guard = g; }

    /** Maps {@code size} bytes of zeroed RAM at {@code base} (both page-aligned). */
    public MemoryRegion addRam(String name, long base, long size) {
        checkFree(name, base, size);
        uc.memMap(base, size, Unicorn.PROT_ALL);
        MemoryRegion r = new MemoryRegion(name, base, size, MemoryRegion.Kind.RAM);
        regions.add(r);
        return r;
    }

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

    /** The region holding {@code pa}, or null. */
    public MemoryRegion regionAt(long pa) {
        for (MemoryRegion r : regions) if (r.contains(pa)) return r;
        return null;
    }

    public MemoryRegion region(String name) {
        for (MemoryRegion r : regions) if (r.name().equals(name)) return r;
        throw new IllegalArgumentException("no memory region named " + name);
    }

    public byte[] read(long pa, int len) { return uc.memRead(pa, len); }

    public void read(long pa, byte[] dst, int off, int len) { uc.memRead(pa, dst, off, len); }

    public void write(long pa, byte[] src) {
        uc.memWrite(pa, src);
        markWritten(pa, src.length);
        if (guard != null) guard.afterHostWrite(pa, src.length);
    }

    public void write(long pa, byte[] src, int off, int len) {
        uc.memWrite(pa, src, off, len);
        markWritten(pa, len);
        if (guard != null) guard.afterHostWrite(pa, len);
    }

    public long readLong(long pa) { return uc.memReadLong(pa); }

    public int readInt(long pa) { return uc.memReadInt(pa); }

    public void writeLong(long pa, long v) {
        uc.memWriteLong(pa, v);
        markWritten(pa, 8);
        if (guard != null) guard.afterHostWrite(pa, 8);
    }

    public void writeInt(long pa, int v) {
        uc.memWriteInt(pa, v);
        markWritten(pa, 4);
        if (guard != null) guard.afterHostWrite(pa, 4);
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
