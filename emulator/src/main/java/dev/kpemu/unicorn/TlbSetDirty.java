package dev.kpemu.unicorn;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.util.Optional;

/**
 * Unicorn's {@code tlb_set_dirty} for x86-64 guests and where the engine state keeps its CPU: what
 * kpemu's instruction clock needs to take a page out of Unicorn's store slow path
 * ({@code kpemu_clock.c}, "The kernel stack page out of Unicorn's store slow path").
 *
 * <p>{@code tlb_set_dirty_x86_64(CPUState *cpu, target_ulong vaddr)} is exported by libunicorn
 * (QEMU's own function: it clears the "not dirty" mark of the CPU's TLB entries for the page of
 * {@code vaddr}, which Unicorn's store path does itself after a store to a page no executable
 * mapping reaches). Its CPU is the engine state's {@code cpu} field ({@code struct uc_struct},
 * private to Unicorn), whose offset is read from libunicorn's own code as {@link AccessExitFlag}
 * reads its flag's: {@code uc_emu_stop} loads it to call {@code cpu_exit} ({@code mov
 * disp32(%rdi),%rdi; test %rdi,%rdi} on an x86-64 host). When either is missing or the code does
 * not have that shape (another build or host), the clock leaves the page alone: slower, never wrong.
 */
final class TlbSetDirty {
    private TlbSetDirty() {}

    /** How far into {@code uc_emu_stop} the load may start (its flag checks come first). */
    private static final int SCAN = 96;
    /** A sane bound on the offset: the engine state's pointers lie in its first few KiB. */
    private static final int MAX_OFFSET = 1 << 16;

    /** {@code tlb_set_dirty_x86_64}, or NULL when libunicorn does not export it. */
    static MemorySegment function(SymbolLookup lib) {
        return lib.find("tlb_set_dirty_x86_64").orElse(MemorySegment.NULL);
    }

    /** The offset of the CPU pointer in the engine state, or -1 when libunicorn's code does not show it. */
    static long engineCpuOffset(SymbolLookup lib) {
        Optional<MemorySegment> f = lib.find("uc_emu_stop");
        if (f.isEmpty()) return -1;
        return engineCpuOffsetIn(f.get().reinterpret(SCAN + 16).toArray(JAVA_BYTE));
    }

    /**
     * The displacement of the first {@code mov disp32(%rdi),%rdi} (48 8b bf) directly followed by
     * {@code test %rdi,%rdi} (48 85 ff) in {@code code}, or -1.
     */
    static long engineCpuOffsetIn(byte[] code) {
        for (int i = 0; i + 10 <= code.length && i < SCAN; i++) {
            if ((code[i] & 0xff) != 0x48 || (code[i + 1] & 0xff) != 0x8b || (code[i + 2] & 0xff) != 0xbf) continue;
            if ((code[i + 7] & 0xff) != 0x48 || (code[i + 8] & 0xff) != 0x85 || (code[i + 9] & 0xff) != 0xff) continue;
            long disp = AccessExitFlag.disp32(code, i + 3);
            return disp > 0 && disp < MAX_OFFSET && disp % 8 == 0 ? disp : -1;
        }
        return -1;
    }
}
