package dev.kpemu.machine.arm64;

import dev.kpemu.machine.GuestMemory;

/**
 * Builds 4-level, 4 KiB-granule, 48-bit stage-1 tables in guest RAM from a test (the kind a
 * boot stub would build). Tables come from a bump allocator of zeroed pages.
 */
final class GuestPageTables {
    static final long VALID = 1, TABLE = 3, PAGE = 3, BLOCK = 1;
    static final long AF = 1L << 10, SH_INNER = 3L << 8, AP_EL0 = 1L << 6, AP_RO = 1L << 7;
    static final long PXN = 1L << 53, UXN = 1L << 54;
    static final long ATTR_NORMAL = 0L << 2, ATTR_DEVICE = 1L << 2;
    /** Kernel read-write normal memory. */
    static final long KERNEL_RW = AF | SH_INNER | ATTR_NORMAL;
    /** MAIR: attr0 normal write-back, attr1 device-nGnRnE. */
    static final long MAIR = 0x00ffL;
    /** T0SZ = T1SZ = 16, 4 KiB granules, inner-shareable write-back walks, IPS 48 bits. */
    static final long TCR = 0x5_b510_3510L;
    /** SCTLR_EL1 RES1 bits of the A57 plus M, C, I. */
    static final long SCTLR_MMU_ON = 0x30d0_1805L;

    private final GuestMemory mem;
    private long next;
    private final long limit;

    GuestPageTables(GuestMemory mem, long poolBase, long poolSize) {
        this.mem = mem;
        this.next = poolBase;
        this.limit = poolBase + poolSize;
    }

    long allocTable() {
        if (next + 4096 > limit) throw new IllegalStateException("page-table pool exhausted");
        long t = next;
        next += 4096;
        mem.write(t, new byte[4096]);
        return t;
    }

    /** The table at {@code level+1} that {@code va} goes through from {@code table} at {@code level}, created if missing. */
    long descend(long table, int level, long va) {
        long slot = table + 8 * index(va, level);
        long d = mem.readLong(slot);
        if ((d & 3) == TABLE) return d & 0x0000_ffff_ffff_f000L;
        if ((d & 1) != 0) throw new IllegalStateException("block already mapped at level " + level);
        long t = allocTable();
        mem.writeLong(slot, t | TABLE);
        return t;
    }

    static long index(long va, int level) { return (va >>> (12 + 9 * (3 - level))) & 0x1ff; }

    /** Maps one 4 KiB page. */
    void mapPage(long root, long va, long pa, long attrs) {
        long t = root;
        for (int level = 0; level < 3; level++) t = descend(t, level, va);
        mem.writeLong(t + 8 * index(va, 3), pa | attrs | PAGE);
    }

    /** Maps one 2 MiB block at level 2. */
    void mapBlock2M(long root, long va, long pa, long attrs) {
        long t = root;
        for (int level = 0; level < 2; level++) t = descend(t, level, va);
        mem.writeLong(t + 8 * index(va, 2), pa | attrs | BLOCK);
    }

    /** The level-3 table covering {@code va} (created if missing, all entries invalid). */
    long level3Table(long root, long va) {
        long t = root;
        for (int level = 0; level < 3; level++) t = descend(t, level, va);
        return t;
    }
}
