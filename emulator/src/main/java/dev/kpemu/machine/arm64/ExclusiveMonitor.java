package dev.kpemu.machine.arm64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;

/**
 * Clears an arm64 engine's exclusive monitor from the host, without running guest code: the
 * monitor is QEMU's {@code exclusive_addr} (-1: open), a word of the CPU state Unicorn's context
 * holds; a saved context with -1 written there and restored leaves the engine with an open
 * monitor, so its next STXR fails whatever happened to the memory (an open monitor is left as it
 * is: the save alone, no restore) (docs/smp-notes.md, fact d;
 * {@code ExclusivesAcrossEnginesTest.contextWordPatchClearsTheMonitor}). A machine with several
 * vCPUs does this to the outgoing vCPU at every switch ({@code Arm64Machine.descheduled}).
 *
 * <p>The word's offset is found once per process by calibration on a throwaway engine, never
 * hard-coded: the engine runs {@code ldxr} of a known address (then the word holds it) and then
 * {@code clrex} (then it holds -1); exactly one word must do so. Running CLREX on the vCPU itself
 * would cost a guest run (~3.7 µs against ~0.16 µs, smp-notes "Costs") and a stub mapped in
 * whatever address space the vCPU is in.
 */
public final class ExclusiveMonitor {
    private static final long BASE = 0x4000_0000L, DATA = BASE + 0x800;
    private static final int LDXR_X1_X9 = 0xc85f_7d21;     // ldxr x1, [x9]
    private static final int CLREX = 0xd503_3f5f;       // clrex
    private static volatile long offset = -1;

    private ExclusiveMonitor() {}

    /** The offset of the monitor's address word in an arm64 context (calibrates on first use). */
    public static long offset() {
        long o = offset;
        if (o < 0) {
            synchronized (ExclusiveMonitor.class) {
                if ((o = offset) < 0) offset = o = calibrate();
            }
        }
        return o;
    }

    /**
     * Clears {@code engine}'s monitor (between its runs) through {@code scratch}, a context of that
     * engine.
     */
    public static void clear(Unicorn engine, Unicorn.Context scratch) { clear(engine, scratch, scratch.blob()); }

    /** As above, with {@code scratch}'s {@link Unicorn.Context#blob()} kept by the caller (each call of which asks the engine its size). */
    public static void clear(Unicorn engine, Unicorn.Context scratch, MemorySegment blob) {
        long o = offset();
        engine.contextSave(scratch);
        if (blob.get(ValueLayout.JAVA_LONG_UNALIGNED, o) == -1L) return;    // open already: no restore needed
        blob.set(ValueLayout.JAVA_LONG_UNALIGNED, o, -1L);
        engine.contextRestore(scratch);
    }

    /** True when {@code engine}'s monitor holds an address (an LDXR's, not yet cleared), read through {@code scratch}. */
    public static boolean armed(Unicorn engine, Unicorn.Context scratch) {
        engine.contextSave(scratch);
        return scratch.blob().get(ValueLayout.JAVA_LONG_UNALIGNED, offset()) != -1L;
    }

    private static long calibrate() {
        try (Unicorn uc = Arm64Machine.openEngine()) {
            uc.memMap(BASE, 0x1000, Unicorn.PROT_ALL);
            uc.memWriteInt(BASE, LDXR_X1_X9);
            uc.memWriteInt(BASE + 4, CLREX);
            uc.regWrite(Arm64Reg.X9, DATA);
            try (Unicorn.Context held = uc.contextAlloc(); Unicorn.Context open = uc.contextAlloc()) {
                uc.start(BASE, BASE + 4, 0, 0);      // ldxr only (up to `until`, no count)
                uc.contextSave(held);
                uc.start(BASE + 4, BASE + 8, 0, 0);  // clrex
                uc.contextSave(open);
                MemorySegment h = held.blob(), c = open.blob();
                long found = -1;
                for (long off = 0; off + 8 <= h.byteSize(); off += 8) {
                    if (h.get(ValueLayout.JAVA_LONG_UNALIGNED, off) == DATA && c.get(ValueLayout.JAVA_LONG_UNALIGNED, off) == -1L) {
                        if (found >= 0) throw fail("two words (" + found + ", " + off + ")");
                        found = off;
                    }
                }
                if (found < 0) throw fail("no word");
                return found;
            }
        }
    }

    private static IllegalStateException fail(String what) {
        return new IllegalStateException("arm64 exclusive-monitor calibration failed: " + what
                + " held the LDXR address after LDXR and -1 after CLREX (this Unicorn build keeps the monitor elsewhere)");
    }
}
