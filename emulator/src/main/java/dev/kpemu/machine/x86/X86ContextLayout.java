package dev.kpemu.machine.x86;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * Offsets of two CPU-state fields inside Unicorn's saved x86 context, found at run time by
 * calibration (never hard-coded, they depend on the library build):
 * <ul>
 * <li>{@code errorCode}: the exception error code QEMU computed (#PF's is not exposed by any
 * register), read by the host to deliver exceptions with the architecture's error code;</li>
 * <li>{@code oldException}: the "exception in flight" marker Unicorn never clears (QEMU clears
 * it during the delivery Unicorn skips), so the second fault would become #DF and the third
 * ends emulation. The host resets it to -1 after each delivered exception.</li>
 * </ul>
 * The calibration runs a tiny paged guest on a throwaway engine: a write to a not-present page
 * (error code 2), then a write to a present read-only page (error code 3). Also found: hflags and
 * the CS/SS segment caches (an {@code iretq} to CPL 3) and RIP (values written through the register
 * API), which the host edits in a prefix context ({@link #privilegeEnd}).
 */
public record X86ContextLayout(long errorCode, long oldException, long hflags, long csCache, long ssCache, long eip) {
    /** Offsets inside a QEMU SegmentCache {u32 selector; u64 base; u32 limit; u32 flags}. */
    public static final int SEG_SELECTOR = 0, SEG_BASE = 8, SEG_LIMIT = 16, SEG_FLAGS = 20;
    /** hflags bits 0-1 hold the CPL. */
    public static final int HF_CPL_MASK = 3;
    /** hflags bit 3 (QEMU's HF_INHIBIT_IRQ_MASK): the instruction at RIP is in the interrupt shadow of sti or mov/pop ss. */
    public static final int HF_INHIBIT_IRQ_MASK = 1 << 3;

    /** A QEMU SegmentCache's size. */
    public static final int SEG_CACHE_SIZE = 24;

    /**
     * Where the fields the CPL lives in (hflags, the CS and SS caches) and RIP end: a context saving
     * that much ({@link Unicorn#contextAllocPrefix}) is enough to read or change the privilege level
     * and to set RIP without Unicorn's register write (which makes the engine leave its execution
     * loop and enter it again).
     */
    public long privilegeEnd() {
        return Math.max(Math.max(hflags + 4, eip + 8), Math.max(csCache, ssCache) + SEG_CACHE_SIZE);
    }

    private static volatile X86ContextLayout cached;

    public static X86ContextLayout get() {
        X86ContextLayout c = cached;
        if (c == null) {
            synchronized (X86ContextLayout.class) {
                if ((c = cached) == null) cached = c = calibrate();
            }
        }
        return c;
    }

    private static X86ContextLayout calibrate() {
        byte[][] notPresent = faultOnce(0x20000);  // write to a not-present page: error code 2
        byte[][] readOnly = faultOnce(0x21000);    // write to a present read-only page: error code 3
        long err = find(notPresent[1], 2, readOnly[1], 3, null, 0);
        long old = find(notPresent[0], -1, notPresent[1], 14, readOnly[1], 14);
        if (err < 0 || old < 0) {
            throw new IllegalStateException("cannot locate error_code/old_exception in the Unicorn context (offsets " + err + ", " + old + ")");
        }
        byte[][] ring = iretToUser();
        long cs = find(ring[0], KCS, ring[1], UCS, null, 0);
        long ss = find(ring[0], KDS, ring[1], UDS, null, 0);
        long hf = findHflags(ring[0], ring[1]);
        if (cs < 0 || ss < 0 || hf < 0) {
            throw new IllegalStateException("cannot locate hflags/CS/SS in the Unicorn context (offsets " + hf + ", " + cs + ", " + ss + ")");
        }
        long eip = findEip();
        if (eip < 0) throw new IllegalStateException("cannot locate RIP in the Unicorn context");
        return new X86ContextLayout(err, old, hf, cs, ss, eip);
    }

    /** RIP's offset: two values written through the register API, the one place holding each in a saved context. */
    private static long findEip() {
        int[] values = {0x5678_9abc, 0x89ab_cdef};   // RIP's low half (little-endian: at RIP's offset)
        try (Unicorn uc = X86Machine.openEngine(); Unicorn.Context ctx = uc.contextAlloc()) {
            byte[][] blobs = new byte[2][];
            for (int i = 0; i < 2; i++) {
                uc.regWrite(X86Reg.RIP, values[i] & 0xffff_ffffL);
                uc.contextSave(ctx);
                blobs[i] = copy(ctx.blob());
            }
            return find(blobs[0], values[0], blobs[1], values[1], null, 0);
        }
    }

    private static final int KCS = 0x10, KDS = 0x18, UDS = 0x23, UCS = 0x2b;

    /**
     * Runs an {@code iretq} from CPL 0 to CPL 3 (Unicorn emulates iretq for real, loading CS and
     * SS from the GDT and changing the CPL) and returns the contexts before and after: the
     * diff locates hflags (CPL in bits 0-1) and the CS and SS segment caches.
     */
    private static byte[][] iretToUser() {
        try (Unicorn uc = X86Machine.openEngine()) {
            uc.memMap(0, 0x20_0000, Unicorn.PROT_ALL);
            uc.memWriteLong(0x1000, 0x2007);
            uc.memWriteLong(0x2000, 0x3007);
            uc.memWriteLong(0x3000, 0x4007);
            for (int i = 0; i < 512; i++) uc.memWriteLong(0x4000 + 8L * i, ((long) i << 12) | 0x7);
            uc.memWriteLong(0x5000 + KCS, X86LongMode.GDT_CODE64);
            uc.memWriteLong(0x5000 + KDS, X86LongMode.GDT_DATA);
            uc.memWriteLong(0x5000 + (UDS & ~3), 0x00cf_f300_0000_ffffL); // data, DPL 3
            uc.memWriteLong(0x5000 + (UCS & ~3), 0x00af_fb00_0000_ffffL); // code64, DPL 3
            X86LongMode.enter(uc, 0x5000, 6 * 8 - 1, 0x1000);
            uc.flushTlb();
            uc.memWrite(0x10000, new byte[] {0x48, (byte) 0xcf});        // iretq
            uc.memWrite(0x11000, new byte[] {(byte) 0x90, (byte) 0x90}); // nop; nop (CPL 3)
            long sp = 0x7000;
            long[] frame = {0x11000, UCS, 0x2, 0x8000, UDS};
            for (int i = 0; i < frame.length; i++) uc.memWriteLong(sp + 8L * i, frame[i]);
            uc.regWrite(X86Reg.RSP, sp);
            try (Unicorn.Context ctx = uc.contextAlloc()) {
                uc.contextSave(ctx);
                byte[] kernel = copy(ctx.blob());
                uc.start(0x10000, 0x11001, 0, 0);
                if (uc.regRead(X86Reg.RIP) != 0x11001 || uc.regRead(X86Reg.CS) != UCS) {
                    throw new IllegalStateException("iretq calibration did not reach CPL 3 (RIP 0x" + Long.toHexString(uc.regRead(X86Reg.RIP)) + ")");
                }
                uc.contextSave(ctx);
                return new byte[][] {kernel, copy(ctx.blob())};
            }
        }
    }

    /** The one 4-byte offset whose value differs only in bits 0-1, from CPL 0 to CPL 3. */
    private static long findHflags(byte[] a, byte[] b) {
        MemorySegment sa = MemorySegment.ofArray(a), sb = MemorySegment.ofArray(b);
        long found = -1;
        for (long off = 0; off + 4 <= a.length; off += 4) {
            int va = sa.get(ValueLayout.JAVA_INT_UNALIGNED, off), vb = sb.get(ValueLayout.JAVA_INT_UNALIGNED, off);
            if ((va & 3) == 0 && (vb & 3) == 3 && (va & ~3) == (vb & ~3) && (va & (1 << 14)) != 0) { // HF_LMA set
                if (found >= 0) return -1;
                found = off;
            }
        }
        return found;
    }

    /** Runs {@code movq $1, target} with paging on; returns the context blobs before and at the #PF. */
    private static byte[][] faultOnce(int target) {
        try (Unicorn uc = X86Machine.openEngine()) {
            uc.memMap(0, 0x20_0000, Unicorn.PROT_ALL);
            // PML4 0x1000 -> PDPT 0x2000 -> PD 0x3000 -> PT 0x4000 (first 2 MiB in 4K pages)
            uc.memWriteLong(0x1000, 0x2003);
            uc.memWriteLong(0x2000, 0x3003);
            uc.memWriteLong(0x3000, 0x4003);
            for (int i = 0; i < 512; i++) uc.memWriteLong(0x4000 + 8L * i, ((long) i << 12) | 0x3);
            uc.memWriteLong(0x4000 + 8L * 0x20, 0);                  // 0x20000: not present
            uc.memWriteLong(0x4000 + 8L * 0x21, (0x21L << 12) | 1);  // 0x21000: present, read-only
            byte[] code = {(byte) 0x48, (byte) 0xc7, 0x04, 0x25,
                (byte) target, (byte) (target >> 8), (byte) (target >> 16), 0x00, 0x01, 0x00, 0x00, 0x00, (byte) 0xf4};
            uc.memWrite(0x10000, code);
            uc.memWriteLong(0x5000 + X86LongMode.BOOT_CS, X86LongMode.GDT_CODE64);
            uc.memWriteLong(0x5000 + X86LongMode.BOOT_DS, X86LongMode.GDT_DATA);
            X86LongMode.enter(uc, 0x5000, 31, 0x1000);
            uc.flushTlb();
            uc.regWrite(X86Reg.RSP, 0x8000);
            try (Unicorn.Context ctx = uc.contextAlloc()) {
                uc.contextSave(ctx);
                byte[] clear = copy(ctx.blob());
                List<byte[]> atFault = new ArrayList<>();
                int[] seen = {-1};
                uc.hookInterrupt((u, intno) -> {
                    seen[0] = intno;
                    if (intno == 14) {
                        u.contextSave(ctx);
                        atFault.add(copy(ctx.blob()));
                    }
                    u.stop();
                });
                uc.start(0x10000, 0x10000 + code.length, 0, 10);
                if (atFault.size() != 1) throw new IllegalStateException("calibration guest raised no page fault (last exception " + seen[0] + ", RIP 0x" + Long.toHexString(uc.regRead(X86Reg.RIP)) + ", CR0 0x" + Long.toHexString(uc.regRead(X86Reg.CR0)) + ")");
                return new byte[][] {clear, atFault.get(0)};
            }
        }
    }

    private static byte[] copy(MemorySegment s) {
        return s.toArray(ValueLayout.JAVA_BYTE);
    }

    /** The only 4-byte offset holding v1 in a, v2 in b and (if c is given) v3 in c; -1 if none or several. */
    private static long find(byte[] a, int v1, byte[] b, int v2, byte[] c, int v3) {
        MemorySegment sa = MemorySegment.ofArray(a), sb = MemorySegment.ofArray(b), sc = c == null ? null : MemorySegment.ofArray(c);
        long found = -1;
        for (long off = 0; off + 4 <= a.length; off++) {
            if (sa.get(ValueLayout.JAVA_INT_UNALIGNED, off) == v1 && sb.get(ValueLayout.JAVA_INT_UNALIGNED, off) == v2
                    && (sc == null || sc.get(ValueLayout.JAVA_INT_UNALIGNED, off) == v3)) {
                if (found >= 0) return -1;
                found = off;
            }
        }
        return found;
    }
}
