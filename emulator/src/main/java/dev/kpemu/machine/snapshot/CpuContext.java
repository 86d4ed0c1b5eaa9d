package dev.kpemu.machine.snapshot;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.BitSet;
import java.util.EnumMap;
import java.util.Map;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.unicorn.Unicorn;

/**
 * A vCPU's whole state as Unicorn saves it ({@code uc_context_save}: QEMU's {@code CPUX86State}
 * up to {@code end_reset_fields}, {@code CPUARMState} up to {@code cpu_watchpoint}: general,
 * segment and descriptor-table registers with their hidden parts, control registers and MSRs,
 * system registers, x87/SSE and FP/SIMD state, the cached translation flags), without the
 * context's header (whose pointers belong to the engine that saved it).
 *
 * <p>Words that differ between two freshly opened engines of the same kind are the engine's own
 * (host pointers, if any such field lies in the saved range): they are found at first use by
 * calibration on throwaway engines, never hard-coded, and a restore keeps the restoring engine's
 * values there. A machine of several vCPUs saves one per engine ({@link #save(Machine, int)}); arm64's
 * exclusive monitor (its address and value words) is part of it.
 */
final class CpuContext {
    private static final Map<Arch, BitSet> ENGINE_WORDS = new EnumMap<>(Arch.class);

    private CpuContext() {}

    /** The CPU state bytes of {@code m}'s engine now. */
    static byte[] save(Machine m) { return save(m.engine()); }

    /** The CPU state bytes of vCPU {@code cpu}'s engine now. */
    static byte[] save(Machine m, int cpu) { return save(m.engine(cpu)); }

    private static byte[] save(Unicorn uc) {
        try (Unicorn.Context c = uc.contextAlloc()) {
            uc.contextSave(c);
            MemorySegment blob = c.blob();
            long header = headerSize(uc, blob);
            return blob.asSlice(header).toArray(ValueLayout.JAVA_BYTE);
        }
    }

    /** Puts {@code data} (from {@link #save} on an engine of the same kind) into {@code m}'s engine. */
    static void restore(Machine m, byte[] data) throws SnapshotException { restore(m, m.engine(), data); }

    /** Puts {@code data} into vCPU {@code cpu}'s engine. */
    static void restore(Machine m, int cpu, byte[] data) throws SnapshotException { restore(m, m.engine(cpu), data); }

    private static void restore(Machine m, Unicorn uc, byte[] data) throws SnapshotException {
        BitSet engineWords = engineWords(m);
        try (Unicorn.Context c = uc.contextAlloc()) {
            uc.contextSave(c);
            MemorySegment blob = c.blob();
            long header = headerSize(uc, blob);
            if (blob.byteSize() - header != data.length) {
                throw new SnapshotException(SnapshotException.Kind.OTHER_MACHINE, "the snapshot's CPU state has " + data.length
                        + " bytes, this engine's " + (blob.byteSize() - header) + " (another Unicorn build)");
            }
            MemorySegment cpu = blob.asSlice(header);
            for (int w = 0; w < data.length / 8; w++) {
                if (engineWords.get(w)) continue;
                cpu.set(ValueLayout.JAVA_LONG_UNALIGNED, 8L * w, java.nio.ByteBuffer.wrap(data, 8 * w, 8).order(java.nio.ByteOrder.nativeOrder()).getLong());
            }
            for (int i = data.length & ~7; i < data.length; i++) cpu.set(ValueLayout.JAVA_BYTE, i, data[i]);
            uc.contextRestore(c);
        }
    }

    /** The context header: the whole blob less the CPU state size its first field records. */
    private static long headerSize(Unicorn uc, MemorySegment blob) {
        long cpuBytes = blob.get(ValueLayout.JAVA_LONG, 0);
        long header = uc.contextSize() - cpuBytes;
        if (cpuBytes <= 0 || header < 0 || header > 256) throw new IllegalStateException("unexpected Unicorn context layout (" + cpuBytes + " CPU bytes)");
        return header;
    }

    private static synchronized BitSet engineWords(Machine m) {
        return ENGINE_WORDS.computeIfAbsent(m.arch(), a -> {
            try (Unicorn a1 = m.openEngineOfSameKind(); Unicorn a2 = m.openEngineOfSameKind();
                 Unicorn.Context c1 = a1.contextAlloc(); Unicorn.Context c2 = a2.contextAlloc()) {
                a1.contextSave(c1);
                a2.contextSave(c2);
                MemorySegment b1 = c1.blob(), b2 = c2.blob();
                long h = headerSize(a1, b1);
                BitSet words = new BitSet();
                for (long off = h; off + 8 <= b1.byteSize(); off += 8) {
                    if (b1.get(ValueLayout.JAVA_LONG_UNALIGNED, off) != b2.get(ValueLayout.JAVA_LONG_UNALIGNED, off)) words.set((int) ((off - h) / 8));
                }
                return words;
            }
        });
    }
}
