package dev.kpemu.machine.arm64;

import java.util.function.IntToLongFunction;

import dev.kpemu.machine.GuestMemory;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;

/**
 * Edits arm64 VMSAv8-64 4 KiB-granule page tables for the host
 * ({@link dev.kpemu.machine.Machine#mapKernelPages}): the walk starts at the level TCR_EL1's
 * TnSZ gives, from TTBR1_EL1 for the upper half, and ends in page descriptors (AF, inner
 * shareable, kernel read-only, UXN); a block the guest mapped there is refused.
 */
final class Arm64PageMapper {
    private Arm64PageMapper() {}

    private static final long VALID_TABLE = 3, PAGE = 3, AF = 1L << 10, SH_INNER = 3L << 8, AP_RO = 1L << 7, UXN = 1L << 54;
    private static final long OA = 0x0000_ffff_ffff_f000L;

    static void map(Unicorn uc, GuestMemory mem, long va, long pa, long size, IntToLongFunction tables) {
        boolean upper = ((va >>> 55) & 1) != 0;
        long tcr = uc.sysRegRead(3, 0, 2, 0, 2);
        int tsz = (int) (upper ? (tcr >>> 16) & 0x3f : tcr & 0x3f);
        int vaBits = 64 - Math.max(tsz, 16);
        int start = 3 - (vaBits - 12 - 1) / 9;
        long table = uc.regRead(upper ? Arm64Reg.TTBR1_EL1 : Arm64Reg.TTBR0_EL1) & 0x0000_ffff_ffff_fffeL;
        for (int level = start; level < 3; level++) {
            long slotPa = table + 8 * ((va >>> (12 + 9 * (3 - level))) & 0x1ff);
            long d = mem.readLong(slotPa);
            if ((d & 3) != VALID_TABLE) {
                if ((d & 1) != 0) throw new IllegalStateException(String.format("slot area 0x%x lies inside a block the guest mapped", va));
                d = tables.applyAsLong(level - start) | VALID_TABLE;
                mem.writeLong(slotPa, d);
            }
            table = d & OA;
        }
        for (long off = 0; off < size; off += 4096) {
            mem.writeLong(table + 8 * (((va + off) >>> 12) & 0x1ff), (pa + off) | PAGE | AF | SH_INNER | AP_RO | UXN);
        }
    }

}
