package dev.kpemu.machine;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.function.Supplier;

import dev.kpemu.unicorn.Unicorn;

/**
 * Where registers' values lie in a saved context of Unicorn's CPU state ({@link Unicorn.Context#blob},
 * the offset counted from the blob's start), found by calibration on a throwaway engine, never
 * hard-coded (they depend on the library's build): each register is written twice through the
 * register API with values no other register holds, and its offset is the one place of the saved
 * context that holds each value, which the register API then reads back. The native probe recorder
 * copies such registers from one context save instead of making an engine call for each
 * ({@code kpemu_probe_hits.h} kpemu_hits_read_registers). Only plain 64-bit registers qualify: one
 * whose value the engine computes when it is read (x86 RFLAGS, arm64 PSTATE) or keeps in another
 * shape (segment selectors) is not asked for.
 */
public final class ContextRegisters {
    private final Supplier<Unicorn> engine;
    private final int[] ids;
    private volatile long[] offsets;

    /** Registers {@code ids} of engines like {@code engine}'s, calibrated at the first {@link #offsetOf}. */
    public ContextRegisters(Supplier<Unicorn> engine, int... ids) {
        this.engine = engine;
        this.ids = ids.clone();
    }

    /** The registers asked about. */
    public int[] ids() { return ids.clone(); }

    /** Where engine register {@code id} lies in a saved context; -1: not one of {@link #ids}, or not found. */
    public long offsetOf(int id) {
        long[] off = offsets;
        if (off == null) offsets = off = offsets(engine, ids);
        for (int i = 0; i < ids.length; i++) if (ids[i] == id) return off[i];
        return -1;
    }

    /**
     * The offsets of registers {@code ids} in a context of {@code engine}'s kind, -1 for one that was
     * not found in exactly one place.
     */
    private static long[] offsets(Supplier<Unicorn> engine, int[] ids) {
        long[] off = new long[ids.length];
        Arrays.fill(off, -1);
        try (Unicorn uc = engine.get(); Unicorn.Context ctx = uc.contextAlloc()) {
            byte[][] saved = new byte[2][];
            for (int round = 0; round < 2; round++) {
                for (int i = 0; i < ids.length; i++) uc.regWrite(ids[i], value(round, i));
                uc.contextSave(ctx);
                saved[round] = ctx.blob().toArray(ValueLayout.JAVA_BYTE);
            }
            for (int i = 0; i < ids.length; i++) {
                if (uc.regRead(ids[i]) != value(1, i)) continue;      // the register does not keep what is written
                off[i] = find(saved[0], value(0, i), saved[1], value(1, i));
            }
        }
        return off;
    }

    /** A value no other register or round writes: a canonical-looking address with the register and round in it. */
    static long value(int round, int i) {
        return 0x0000_4b50_0000_0000L | (long) (i + 1) << 24 | (round + 1L) << 12 | 0xa58;
    }

    /** The only offset holding {@code v0} in {@code a} and {@code v1} in {@code b} (8 bytes, little-endian); -1 if none or several. */
    private static long find(byte[] a, long v0, byte[] b, long v1) {
        MemorySegment sa = MemorySegment.ofArray(a), sb = MemorySegment.ofArray(b);
        long found = -1;
        for (long o = 0; o + 8 <= a.length; o++) {
            if (sa.get(ValueLayout.JAVA_LONG_UNALIGNED, o) == v0 && sb.get(ValueLayout.JAVA_LONG_UNALIGNED, o) == v1) {
                if (found >= 0) return -1;
                found = o;
            }
        }
        return found;
    }
}
