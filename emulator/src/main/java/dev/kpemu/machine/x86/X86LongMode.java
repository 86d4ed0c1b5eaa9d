package dev.kpemu.machine.x86;

import dev.kpemu.machine.GuestMemory;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * Puts the vCPU in 64-bit long mode with paging on, as a boot loader would: a flat GDT
 * (Linux's boot selectors: code 0x10, data 0x18), identity-mapped page tables built from 2 MiB
 * pages, CR0/CR3/CR4/EFER and the segment registers.
 */
public final class X86LongMode {
    public static final int BOOT_CS = 0x10, BOOT_DS = 0x18;
    static final long GDT_CODE64 = 0x00af_9b00_0000_ffffL; // present, DPL0, code, L=1
    static final long GDT_DATA = 0x00cf_9300_0000_ffffL;   // present, DPL0, data, writable

    private X86LongMode() {}

    /** Writes a 4-entry GDT at {@code pa}; returns its limit. */
    public static int writeGdt(GuestMemory mem, long pa) {
        mem.writeLong(pa, 0);
        mem.writeLong(pa + 8, 0);
        mem.writeLong(pa + BOOT_CS, GDT_CODE64);
        mem.writeLong(pa + BOOT_DS, GDT_DATA);
        return 4 * 8 - 1;
    }

    /**
     * Builds identity page tables for [0, bytes) with 2 MiB pages at {@code pml4} (uses the next
     * 4 KiB for the PDPT and one 4 KiB page directory per GiB after it). Returns the first free
     * physical address after the tables.
     */
    public static long identityMap(GuestMemory mem, long pml4, long bytes) {
        long pdpt = pml4 + 0x1000;
        long pd = pdpt + 0x1000;
        mem.write(pml4, new byte[0x1000]);
        mem.write(pdpt, new byte[0x1000]);
        mem.writeLong(pml4, pdpt | 0x3);
        long gib = (bytes + (1L << 30) - 1) >>> 30;
        for (long g = 0; g < gib; g++) {
            long dir = pd + g * 0x1000;
            mem.writeLong(pdpt + 8 * g, dir | 0x3);
            for (int i = 0; i < 512; i++) {
                long pa = (g << 30) + ((long) i << 21);
                mem.writeLong(dir + 8L * i, pa < bytes ? pa | 0x83 : 0);
            }
        }
        return pd + gib * 0x1000;
    }

    /** Loads GDTR, segment registers, CR3/CR4/EFER/CR0: long mode, paging and NX on. */
    public static void enter(Unicorn uc, long gdtBase, int gdtLimit, long cr3) {
        uc.mmrWrite(X86Reg.GDTR, new Unicorn.X86Mmr(0, gdtBase, gdtLimit, 0));
        uc.regWrite(X86Reg.CR3, cr3);
        uc.regWrite(X86Reg.CR4, uc.regRead(X86Reg.CR4) | (1 << 5));        // PAE
        uc.msrWrite(X86Machine.MSR_EFER, uc.msrRead(X86Machine.MSR_EFER) | (1 << 8) | (1 << 10) | (1 << 11)); // LME LMA NXE
        uc.regWrite(X86Reg.CR0, uc.regRead(X86Reg.CR0) | 0x8001_0001L);    // PG WP PE
        uc.regWrite(X86Reg.CS, BOOT_CS);
        for (int seg : new int[] {X86Reg.SS, X86Reg.DS, X86Reg.ES}) uc.regWrite(seg, BOOT_DS);
    }
}
