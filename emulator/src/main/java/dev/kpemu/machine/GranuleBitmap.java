package dev.kpemu.machine;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

/**
 * The instruction clock's one look per block at "is there anything here" ({@code guard_bits} in
 * {@code kpemu_clock.c}): a bitmap of 32-byte granules of guest-virtual addresses, hashed over
 * {@link #BITS} bits, with a bit set for every granule that something the block hook must look at
 * touches — a guarded text range ({@link TextGuard}) and, on arm64, a host break address
 * ({@link InstructionClock}). A block none of whose granules has a bit set runs with no further
 * check. The granule bits are followed by a page summary, {@link #PAGE_BITS} bits with one set for
 * every 4 KiB page (hashed) that holds a marked granule: an arm64 block tests its page's bit, and
 * its granules only on such a page. Each bit counts its users, so the owners mark and unmark
 * independently.
 */
final class GranuleBitmap implements AutoCloseable {
    /** Bits of the bitmap (KPEMU_GUARD_BITS in kpemu_clock.c). */
    static final int BITS = 1 << 21;
    /** log2 of the bytes one bit stands for (KPEMU_GUARD_GRANULE_SHIFT). */
    static final int GRANULE_SHIFT = 5;
    /** Bits of the page summary after the granule bits (KPEMU_GUARD_PAGE_BITS). */
    static final int PAGE_BITS = 1 << 15;
    private static final int PAGE_SHIFT = 12;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment bits = arena.allocate(BITS / 8 + PAGE_BITS / 8, 64);
    /** Users of each set granule bit (a bit is set while its count is positive). */
    private final Map<Integer, Integer> users = new HashMap<>();
    /** Users of each set page bit, by its index after the granule bits. */
    private final Map<Integer, Integer> pageUsers = new HashMap<>();

    GranuleBitmap() { bits.fill((byte) 0); }

    MemorySegment nativeBits() { return bits; }

    /**
     * Counts [va, va + len) in ({@code delta} 1) or out of (-1) the bits of its granules; true when
     * a bit changed (a cache of the bitmap's answers is then stale).
     */
    boolean mark(long va, int len, int delta) {
        boolean changed = false;
        for (long g = va >>> GRANULE_SHIFT; g <= (va + len - 1) >>> GRANULE_SHIFT; g++) {
            changed |= count(users, 0, (int) (g & (BITS - 1)), delta);
        }
        for (long p = va >>> PAGE_SHIFT; p <= (va + len - 1) >>> PAGE_SHIFT; p++) {
            count(pageUsers, BITS / 8, (int) (p & (PAGE_BITS - 1)), delta);
        }
        return changed;
    }

    /** Adds {@code delta} users to bit {@code bit} of the bits at byte {@code base}; true when the bit changed. */
    private boolean count(Map<Integer, Integer> counts, long base, int bit, int delta) {
        int n = counts.getOrDefault(bit, 0) + delta;
        if (n > 0) counts.put(bit, n);
        else counts.remove(bit);
        long word = base + 8L * (bit >>> 6), mask = 1L << (bit & 63);
        long w = bits.get(JAVA_LONG, word);
        long now = n > 0 ? w | mask : w & ~mask;
        if (now == w) return false;
        bits.set(JAVA_LONG, word, now);
        return true;
    }

    @Override public void close() { arena.close(); }
}
