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
    void map(Machine machine, ArchKprobes arch) {
        if (!tablesZeroed) {
            machine.memory().write(physicalBase + size - TABLE_PAGES * PAGE, new byte[(int) (TABLE_PAGES * PAGE)]);
            tablesZeroed = true;
        }
        arch.mapPages(machine, virtualBase, physicalBase, size - TABLE_PAGES * PAGE, this::tablePage);
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
