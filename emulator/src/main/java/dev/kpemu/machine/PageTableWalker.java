package dev.kpemu.machine;

/** Translates guest-virtual addresses through the guest's current page tables, as the MMU would. */
public interface PageTableWalker {
    enum Access { READ, WRITE, FETCH }

    /** A successful walk: the physical address and the permissions of the final entry. */
    record Translation(long physical, long pageSize, boolean writable, boolean user, boolean executable) {}

    /**
     * Walks the tables for {@code va}. Returns null when the address is not mapped. Permissions
     * are reported, not enforced: the host may read and write kernel text the guest cannot.
     */
    Translation translate(long va);
}
