package dev.kpemu.machine.x86;

import java.util.function.IntToLongFunction;

import dev.kpemu.machine.GuestMemory;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * Edits x86-64 4-level page tables for the host ({@link dev.kpemu.machine.Machine#mapKernelPages}):
 * a 2 MiB-aligned area of at most 2 MiB takes one 2 MiB page, anything else 4 KiB pages under
 * tables the caller provides. 5-level paging is refused.
 */
final class X86PageMapper {
    private X86PageMapper() {}

    private static final long PRESENT = 1, WRITABLE = 2, LARGE = 1 << 7, ADDR = 0x000f_ffff_ffff_f000L;
    private static final long LARGE_PAGE = 2L << 20;

    static void map(Unicorn uc, GuestMemory mem, long va, long pa, long size, IntToLongFunction tables) {
        if ((uc.regRead(X86Reg.CR4) & (1 << 12)) != 0) throw new IllegalStateException("5-level paging is not supported for the slot area");
        long table = uc.regRead(X86Reg.CR3) & ADDR;
        // a 2 MiB-aligned area of at most 2 MiB takes one 2 MiB page (its table pages, unused then, included)
        boolean largePage = size <= LARGE_PAGE && (va & (LARGE_PAGE - 1)) == 0 && (pa & (LARGE_PAGE - 1)) == 0;
        for (int level = 4; level >= 2; level--) {
            if (level == 2 && largePage) {
                // one 2 MiB leaf: no table page of the host's for the kernel's page-table walkers
                // (the boot-time W+X check) to read through a direct map that does not cover it
                long slotPa = table + 8 * ((va >>> 21) & 0x1ff);
                long e = mem.readLong(slotPa);
                if ((e & PRESENT) != 0) throw new IllegalStateException(String.format("slot area 0x%x: the guest maps it already", va));
                mem.writeLong(slotPa, pa | PRESENT | LARGE);
                return;
            }
            long slotPa = table + 8 * ((va >>> (12 + 9 * (level - 1))) & 0x1ff);
            long e = mem.readLong(slotPa);
            if ((e & PRESENT) == 0) {
                e = tables.applyAsLong(4 - level) | PRESENT | WRITABLE;
                mem.writeLong(slotPa, e);
            } else if ((e & LARGE) != 0) {
                throw new IllegalStateException(String.format("slot area 0x%x lies inside a large page the guest mapped", va));
            }
            table = e & ADDR;
        }
        for (long off = 0; off < size; off += 4096) {
            mem.writeLong(table + 8 * (((va + off) >>> 12) & 0x1ff), (pa + off) | PRESENT);
        }
    }

}
