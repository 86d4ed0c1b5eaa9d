package dev.kpemu.machine.arm64;

import dev.kpemu.machine.GuestMemory;
import dev.kpemu.machine.PageTableWalker;

/**
 * A stage-1 EL1&0 table walk as the MMU does it: 4 KiB granule, up to 48-bit VAs, TTBR0_EL1
 * for VAs with bit 55 clear and TTBR1_EL1 for VAs with it set, region sizes from TCR_EL1
 * T0SZ/T1SZ, top-byte-ignore from TBI0/TBI1, walks disabled by EPD0/EPD1. Table, block (1 GiB,
 * 2 MiB) and page descriptors; hierarchical APTable/UXNTable/PXNTable are applied. With
 * SCTLR_EL1.M clear the translation is the identity.
 *
 * <p>{@link Translation#executable()} means executable at the level the page is for: EL0 (UXN)
 * for pages EL0 may access, EL1 (PXN) otherwise.
 *
 * <p>A walker is a snapshot of the translation registers; take a new one from
 * {@link Arm64Machine#pageTables()} after the guest changes them.
 */
public final class Arm64PageWalker implements PageTableWalker {
    private static final long PAGE = 4096;
    private static final long OA_MASK = 0x0000_ffff_ffff_f000L;   // output address bits 47:12
    private static final long TTBR_BADDR_MASK = 0x0000_ffff_ffff_fffeL;

    private final GuestMemory memory;
    private final boolean mmuOn;
    private final long ttbr0, ttbr1, tcr;

    public Arm64PageWalker(GuestMemory memory, long sctlr, long tcr, long ttbr0, long ttbr1) {
        this.memory = memory;
        this.mmuOn = (sctlr & 1) != 0;
        this.tcr = tcr;
        this.ttbr0 = ttbr0;
        this.ttbr1 = ttbr1;
    }

    public boolean mmuEnabled() { return mmuOn; }

    @Override
    public Translation translate(long va) {
        if (!mmuOn) return new Translation(va, PAGE, true, true, true);
        boolean upper = ((va >>> 55) & 1) != 0;
        int tsz = (int) (upper ? (tcr >>> 16) & 0x3f : tcr & 0x3f);
        boolean epd = ((tcr >>> (upper ? 23 : 7)) & 1) != 0;
        boolean tbi = ((tcr >>> (upper ? 38 : 37)) & 1) != 0;
        int tg = (int) (upper ? (tcr >>> 30) & 3 : (tcr >>> 14) & 3);
        boolean granule4k = upper ? tg == 2 : tg == 0;
        if (epd || !granule4k) return null;
        if (tsz < 16) tsz = 16;                 // 48-bit VAs at most (no LVA/LPA)
        int vaBits = 64 - tsz;
        // Bits [63:vaBits] (or [55:vaBits] with top-byte-ignore) must all equal bit 55.
        int checkTop = tbi ? 56 : 64;
        if (checkTop > vaBits) {
            long field = (va << (64 - checkTop)) >> (64 - checkTop + vaBits);   // sign-extended field
            if (field != (upper ? -1L : 0L)) return null;
        }
        // 4 KiB granule: 9 bits per level, level 3 resolves bits 20:12.
        int startLevel = 3 - (vaBits - 12 - 1) / 9;
        long table = (upper ? ttbr1 : ttbr0) & TTBR_BADDR_MASK;
        boolean apTableRo = false, apTableNoEl0 = false, uxnTable = false, pxnTable = false;
        for (int level = startLevel; level <= 3; level++) {
            int shift = 12 + 9 * (3 - level);
            int bits = level == startLevel ? vaBits - shift : 9;
            long index = (va >>> shift) & ((1L << bits) - 1);
            long descAddr = table + index * 8;
            if (!memory.isRam(descAddr)) return null;
            long d = memory.readLong(descAddr);
            if ((d & 1) == 0) return null;
            boolean tableOrPage = (d & 2) != 0;
            if (level < 3 && tableOrPage) {
                apTableRo |= ((d >>> 62) & 1) != 0;
                apTableNoEl0 |= ((d >>> 61) & 1) != 0;
                uxnTable |= ((d >>> 60) & 1) != 0;
                pxnTable |= ((d >>> 59) & 1) != 0;
                table = d & OA_MASK;
                continue;
            }
            if (level == 3 && !tableOrPage) return null;     // reserved encoding
            if (level == 0) return null;                      // no level-0 blocks with 4 KiB
            long size = 1L << shift;
            long pa = (d & OA_MASK & ~(size - 1)) | (va & (size - 1));
            int ap = (int) (d >>> 6) & 3;
            boolean user = (ap & 1) != 0 && !apTableNoEl0;
            boolean writable = (ap & 2) == 0 && !apTableRo;
            boolean uxn = ((d >>> 54) & 1) != 0 || uxnTable;
            boolean pxn = ((d >>> 53) & 1) != 0 || pxnTable;
            return new Translation(pa, size, writable, user, user ? !uxn : !pxn);
        }
        return null;
    }
}
