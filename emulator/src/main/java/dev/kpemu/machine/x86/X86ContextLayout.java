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
 * (error code 2), then a write to a present read-only page (error code 3).
 */
public record X86ContextLayout(long errorCode, long oldException) {
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
        return new X86ContextLayout(err, old);
    }

    /** Runs {@code movq $1, target} with paging on; returns the context blobs before and at the #PF. */
    private static byte[][] faultOnce(int target) {
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64)) {
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
