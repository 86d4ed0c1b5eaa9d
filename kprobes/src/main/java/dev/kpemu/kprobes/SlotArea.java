package dev.kpemu.kprobes;

import java.util.BitSet;

import dev.kpemu.machine.Machine;

/**
 * Guest memory for out-of-line copies and the kretprobe trampoline (the kernel's
 * {@code kprobe_insn_slots}): {@code size} bytes of guest-physical memory the guest's allocators
 * never hand out (RAM outside the memory map given to the guest), mapped executable at
 * {@code virtualBase} in the kernel's address space. On x86-64 the area must lie within ±2 GiB of
 * kernel text (rel32 fix-ups and jumps back). Its last {@link #TABLE_PAGES} pages hold the
 * page-table pages the mapping needs.
 *
 * <p>Slots are written through physical memory, so they can be filled before the mapping exists;
 * the engine maps the area when the first probe is registered and again whenever a fetch from
 * it faults (the guest switched to tables that lack it).
 */
public final class SlotArea {
    /** Bytes per slot (x86 MAX_INSN_SIZE; arm64 uses 8 of them). */
    public static final int SLOT_SIZE = 16;
    public static final int TABLE_PAGES = 4;
    private static final long PAGE = 4096;

    /**
     * x86-64 default: the unused 2 GiB hole just below the kernel text mapping
     * ({@code ffffffff00000000–ffffffff7fffffff} in Documentation/x86/x86_64/mm.rst), within rel32
     * reach of all kernel text.
     */
    public static final long X86_KERNEL_DEFAULT_VA = 0xffff_ffff_7fe0_0000L;

    private final long virtualBase;
    private final long physicalBase;
    private final long size;
    private final BitSet used = new BitSet();
    private final int slots;
    private boolean tablesZeroed;

    /**
     * @param virtualBase page-aligned guest-virtual base
     * @param physicalBase page-aligned guest-physical base of reserved RAM
     * @param size bytes, a page multiple larger than the table pages
     */
    public SlotArea(long virtualBase, long physicalBase, long size) {
        if ((virtualBase | physicalBase | size) % PAGE != 0 || size <= TABLE_PAGES * PAGE) {
            throw new IllegalArgumentException("slot area must be page-aligned and larger than " + TABLE_PAGES + " pages");
        }
        if ((virtualBase >>> 21) != ((virtualBase + size - 1) >>> 21)) {
            throw new IllegalArgumentException("slot area must not cross a 2 MiB boundary (one last-level table maps it)");
        }
        this.virtualBase = virtualBase;
        this.physicalBase = physicalBase;
        this.size = size;
        this.slots = (int) ((size - TABLE_PAGES * PAGE) / SLOT_SIZE);
    }

    public long virtualBase() { return virtualBase; }

    public long physicalBase() { return physicalBase; }

    public long size() { return size; }

    /** Bytes used for slots (the rest holds page tables). */
    public long slotBytes() { return (long) slots * SLOT_SIZE; }

    public boolean contains(long va) {
        return Long.compareUnsigned(va - virtualBase, slotBytes()) < 0;
    }

    /** Allocates a slot; ENOMEM when full. */
    long allocate() {
        int i = used.nextClearBit(0);
        if (i >= slots) throw new KprobeException(Errno.ENOMEM, "no free kprobe instruction slot");
        used.set(i);
        return virtualBase + (long) i * SLOT_SIZE;
    }

    void free(long slot) {
        used.clear((int) ((slot - virtualBase) / SLOT_SIZE));
    }

    /**
     * Allocates {@code bytes} of consecutive slots (a jump-optimization detour buffer) whose whole
     * range lies within {@code reach} bytes of {@code near} (x86 rel32: ±2 GiB; arm64 {@code B}:
     * ±128 MiB). ERANGE when the area is out of reach, ENOMEM when no run is free.
     */
    long allocate(int bytes, long near, long reach) {
        if (bytes <= 0) throw new IllegalArgumentException("bytes " + bytes);
        long end = virtualBase + slotBytes();
        if (!within(virtualBase, near, reach) && !within(end, near, reach)) {
            throw new KprobeException(Errno.ERANGE, String.format("slot area at 0x%x is out of reach (±0x%x) of 0x%x", virtualBase, reach, near));
        }
        int n = (bytes + SLOT_SIZE - 1) / SLOT_SIZE;
        for (int i = used.nextClearBit(0); i + n <= slots; i = used.nextClearBit(i)) {
            int taken = used.nextSetBit(i);
            if (taken >= 0 && taken < i + n) {
                i = taken;
                continue;
            }
            long va = virtualBase + (long) i * SLOT_SIZE;
            if (within(va, near, reach) && within(va + (long) n * SLOT_SIZE, near, reach)) {
                used.set(i, i + n);
                return va;
            }
            i++;
        }
        throw new KprobeException(Errno.ENOMEM, "no " + bytes + " free bytes of kprobe slot memory in reach");
    }

    /** Frees what {@link #allocate(int, long, long)} returned. */
    void free(long va, int bytes) {
        int i = (int) ((va - virtualBase) / SLOT_SIZE);
        used.clear(i, i + (bytes + SLOT_SIZE - 1) / SLOT_SIZE);
    }

    private static boolean within(long va, long near, long reach) {
        long d = va - near;
        return d > -reach && d < reach;
    }

    int slotsInUse() { return used.cardinality(); }

    /** Writes slot bytes through physical memory and drops translated code for them. */
    void write(Machine machine, long slotVa, byte[] code) {
        machine.memory().write(physicalBase + (slotVa - virtualBase), code);
        try {
            machine.invalidateCode(slotVa, code.length);
        } catch (RuntimeException notMappedYet) {
            // nothing can have been translated from an unmapped address
        }
    }

    /** Maps the area into the guest's current tables (idempotent). */
    void map(Machine machine) {
        if (!tablesZeroed) {
            machine.memory().write(physicalBase + size - TABLE_PAGES * PAGE, new byte[(int) (TABLE_PAGES * PAGE)]);
            tablesZeroed = true;
        }
        machine.mapKernelPages(virtualBase, physicalBase, size - TABLE_PAGES * PAGE, this::tablePage);
        machine.engine().flushTlb();
    }

    /** True when the current tables translate the area's first page to it. */
    boolean mappedIn(Machine machine) {
        var t = machine.pageTables().translate(virtualBase);
        return t != null && t.physical() == physicalBase;
    }

    /**
     * The area's own table page for translation level {@code level} (0 = the level below the
     * root). The area fits one last-level table, so each level needs one page, reused when the
     * area is mapped again into other tables.
     */
    private long tablePage(int level) {
        if (level < 0 || level >= TABLE_PAGES) throw new IllegalArgumentException("table level " + level);
        return physicalBase + size - (long) (TABLE_PAGES - level) * PAGE;
    }
}
