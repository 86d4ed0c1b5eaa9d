package dev.kpemu.machine.x86;

import dev.kpemu.machine.GuestMemory;
import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * Walks x86-64 4-level (or 5-level with CR4.LA57) page tables from CR3, as the MMU does, with
 * 1 GiB and 2 MiB large pages. With CR0.PG clear the translation is the identity.
 */
public final class X86PageWalker implements PageTableWalker {
    static final long PRESENT = 1, WRITABLE = 1 << 1, USER = 1 << 2, ACCESSED = 1 << 5, DIRTY = 1 << 6, LARGE = 1 << 7;
    static final long NX = 1L << 63;
    static final long ADDR_MASK = 0x000f_ffff_ffff_f000L;
    private static final long CR0_PG = 1L << 31, CR4_LA57 = 1L << 12;

    private final Unicorn uc;
    private final GuestMemory memory;

    X86PageWalker(Unicorn uc, GuestMemory memory) {
        this.uc = uc;
        this.memory = memory;
    }

    private Unicorn.RegisterBatch controlRegisters;
    private final long[] controlValues = new long[3];

    /**
     * A walker over the tables as they are now: CR0, CR4 and CR3 read once, in one engine call,
     * instead of three calls a walk ({@link #translate}); for walks while the guest does not run
     * (a probe hit's reads of guest memory).
     */
    public PageTableWalker now() {
        if (controlRegisters == null) controlRegisters = uc.registerBatch(X86Reg.CR0, X86Reg.CR4, X86Reg.CR3);
        long[] r = controlValues;
        controlRegisters.read(r);
        return over(r[0], r[1], r[2]);
    }

    /**
     * A walker over the tables that CR0, CR4 and CR3 with these values describe: for a caller that
     * read them in a batch of its own (a probe hit reads them with its other registers).
     */
    public PageTableWalker over(long cr0, long cr4, long cr3) {
        return new Snapshot(this, (cr0 & CR0_PG) != 0, cr3, (cr4 & CR4_LA57) != 0);
    }

    /** {@link #now}'s walker: the control registers' values when it was made. */
    private record Snapshot(X86PageWalker walker, boolean paging, long cr3, boolean la57) implements PageTableWalker {
        @Override
        public Translation translate(long va) {
            return paging ? walker.walk(cr3, va, la57) : new Translation(va, 1L << 30, true, true, true);
        }
    }

    @Override
    public Translation translate(long va) {
        if ((uc.regRead(X86Reg.CR0) & CR0_PG) == 0) return new Translation(va, 1L << 30, true, true, true);
        boolean la57 = (uc.regRead(X86Reg.CR4) & CR4_LA57) != 0;
        return walk(uc.regRead(X86Reg.CR3), va, la57);
    }

    /** Walks the tables rooted at {@code cr3}; null when not present at some level. */
    public Translation walk(long cr3, long va, boolean la57) {
        long table = cr3 & ADDR_MASK;
        int levels = la57 ? 5 : 4;
        boolean writable = true, user = true, exec = true;
        for (int level = levels; level >= 1; level--) {
            int shift = 12 + 9 * (level - 1);
            long index = (va >>> shift) & 0x1ff;
            long entry;
            try {
                entry = memory.readLong(table + index * 8);
            } catch (RuntimeException e) {
                return null; // table outside RAM
            }
            if ((entry & PRESENT) == 0) return null;
            writable &= (entry & WRITABLE) != 0;
            user &= (entry & USER) != 0;
            exec &= (entry & NX) == 0;
            if (level == 1 || ((level == 2 || level == 3) && (entry & LARGE) != 0)) {
                long pageSize = 1L << shift;
                long base = entry & ADDR_MASK & ~(pageSize - 1);
                return new Translation(base | (va & (pageSize - 1)), pageSize, writable, user, exec);
            }
            table = entry & ADDR_MASK;
        }
        return null;
    }
}
