package dev.kpemu.machine.arm64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;

/**
 * Where QEMU's {@code env->exception.syndrome} and {@code .vaddress}, and the PC, sit inside a
 * Unicorn context blob (offsets from the blob's start, header included). Unicorn never runs QEMU's exception entry, so ESR_EL1/FAR_EL1 stay 0, but QEMU
 * has computed the syndrome and fault address before it calls the interrupt hook, and both
 * fields are part of the saved context. The offsets are found once per process by calibration
 * on a throwaway engine (two SVCs with different immediates; two alignment faults at different
 * addresses) and never hard-coded: they depend on the library build. The PC is written through a
 * context that ends after it ({@link Arm64Machine#setPc}).
 */
record ExceptionStateLayout(long contextSize, long syndromeOffset, long vaddressOffset, long pcOffset) {
    private static final long BASE = 0x4000_0000L;
    private static final int SVC_1234 = 0xd400_0001 | (0x1234 << 5);
    private static final int SVC_4321 = 0xd400_0001 | (0x4321 << 5);
    private static final int LDXR_X0_X1 = 0xc85f_7c20;
    private static final int LDXR_X0_X2 = 0xc85f_7c40;
    private static final long ADDR_A = BASE + 0x801, ADDR_B = BASE + 0xc03;   // unaligned: alignment faults

    private static volatile ExceptionStateLayout cached;

    /** The calibrated layout (calibrates on first use). */
    static ExceptionStateLayout get() {
        ExceptionStateLayout l = cached;
        if (l == null) {
            synchronized (ExceptionStateLayout.class) {
                if ((l = cached) == null) cached = l = calibrate();
            }
        }
        return l;
    }

    int syndrome(MemorySegment blob) { return blob.get(ValueLayout.JAVA_INT_UNALIGNED, syndromeOffset); }

    long vaddress(MemorySegment blob) { return blob.get(ValueLayout.JAVA_LONG_UNALIGNED, vaddressOffset); }

    private static ExceptionStateLayout calibrate() {
        try (Unicorn uc = Arm64Machine.openEngine()) {
            uc.memMap(BASE, 0x1000, Unicorn.PROT_ALL);
            int[] prog = {SVC_1234, SVC_4321, LDXR_X0_X1, LDXR_X0_X2};
            for (int i = 0; i < prog.length; i++) uc.memWriteInt(BASE + 4L * i, prog[i]);
            uc.regWrite(Arm64Reg.X1, ADDR_A);
            uc.regWrite(Arm64Reg.X2, ADDR_B);
            List<byte[]> blobs = new ArrayList<>();
            try (Unicorn.Context ctx = uc.contextAlloc()) {
                Unicorn.Hook h = uc.hookInterrupt((u, intno) -> {
                    u.contextSave(ctx);
                    blobs.add(ctx.blob().toArray(ValueLayout.JAVA_BYTE));
                    long pc = u.regRead(Arm64Reg.PC);
                    if (intno == Arm64Machine.EXCP_DATA_ABORT) u.regWrite(Arm64Reg.PC, pc + 4);
                    if (blobs.size() == prog.length) u.stop();
                });
                uc.start(BASE, BASE + 4L * prog.length, 0, 0);
                uc.delete(h);
            }
            if (blobs.size() != prog.length) throw fail("saw " + blobs.size() + " of " + prog.length + " exceptions");
            long size = uc.contextSize();
            MemorySegment a = MemorySegment.ofArray(blobs.get(0)), b = MemorySegment.ofArray(blobs.get(1)),
                    c = MemorySegment.ofArray(blobs.get(2)), d = MemorySegment.ofArray(blobs.get(3));
            long syn = unique(a, b, 4, 0x5600_1234L, 0x5600_4321L, "syndrome");
            long va = unique(c, d, 8, ADDR_A, ADDR_B, "fault address");
            long pc = unique(a, b, 8, BASE + 4, BASE + 8, "PC");   // Unicorn leaves PC after the SVC
            int abortSyn = c.get(ValueLayout.JAVA_INT_UNALIGNED, syn);
            if ((abortSyn >>> 26) != 0x25) throw fail("alignment fault syndrome 0x" + Integer.toHexString(abortSyn) + " has the wrong EC");
            return new ExceptionStateLayout(size, syn, va, pc);
        }
    }

    private static long unique(MemorySegment a, MemorySegment b, int width, long va, long vb, String what) {
        long found = -1;
        for (long o = 0; o + width <= a.byteSize(); o++) {
            long x = width == 4 ? Integer.toUnsignedLong(a.get(ValueLayout.JAVA_INT_UNALIGNED, o)) : a.get(ValueLayout.JAVA_LONG_UNALIGNED, o);
            if (x != va) continue;
            long y = width == 4 ? Integer.toUnsignedLong(b.get(ValueLayout.JAVA_INT_UNALIGNED, o)) : b.get(ValueLayout.JAVA_LONG_UNALIGNED, o);
            if (y != vb) continue;
            if (found >= 0) throw fail(what + " found at two offsets (" + found + ", " + o + ")");
            found = o;
        }
        if (found < 0) throw fail(what + " not found in the context blob");
        return found;
    }

    private static IllegalStateException fail(String why) {
        return new IllegalStateException("arm64 exception-state calibration failed: " + why
                + " (this Unicorn build does not keep QEMU's exception state where expected)");
    }
}
