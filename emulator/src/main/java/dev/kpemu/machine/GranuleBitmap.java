package dev.kpemu.machine;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

/**
 * Which translated blocks may hold guarded text ({@code guard_bits} in {@code kpemu_clock.c}): a
 * bitmap of 32-byte granules of guest-virtual addresses, hashed over {@link #BITS} bits, with a bit
 * set for every granule a {@link TextGuard} range touches. When Unicorn translates a block none of
 * whose granules has a bit set, the clock's translation hook looks no further. Each bit counts its
 * users, so ranges that share a granule mark and unmark independently.
 */
final class GranuleBitmap implements AutoCloseable {
    /** Bits of the bitmap (KPEMU_GUARD_BITS in kpemu_clock.c). */
    static final int BITS = 1 << 21;
    /** log2 of the bytes one bit stands for (KPEMU_GUARD_GRANULE_SHIFT). */
    static final int GRANULE_SHIFT = 5;

    private final Arena arena = Arena.ofShared();
    private final int size;
    private final MemorySegment bits;
    /** Users of each set granule bit (a bit is set while its count is positive). */
    private final Map<Integer, Integer> users = new HashMap<>();

    GranuleBitmap() { this(BITS); }

    /** A bitmap of {@code size} bits (a power of two; the native side's for its use). */
    GranuleBitmap(int size) {
        if (Integer.bitCount(size) != 1 || size < 64) throw new IllegalArgumentException("granule bitmap of " + size + " bits");
        this.size = size;
        this.bits = arena.allocate(size / 8, 64);
        bits.fill((byte) 0);
    }

    MemorySegment nativeBits() { return bits; }

    /** Counts [va, va + len) in ({@code delta} 1) or out of (-1) the bits of its granules. */
    void mark(long va, int len, int delta) {
        for (long g = va >>> GRANULE_SHIFT; g <= (va + len - 1) >>> GRANULE_SHIFT; g++) count((int) (g & (size - 1)), delta);
    }

    /** Adds {@code delta} users to granule bit {@code bit}. */
    private void count(int bit, int delta) {
        int n = users.getOrDefault(bit, 0) + delta;
        if (n > 0) users.put(bit, n);
        else users.remove(bit);
        long word = 8L * (bit >>> 6), mask = 1L << (bit & 63);
        long w = bits.get(JAVA_LONG, word);
        bits.set(JAVA_LONG, word, n > 0 ? w | mask : w & ~mask);
    }

    @Override public void close() { arena.close(); }
}
