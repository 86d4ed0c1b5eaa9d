package dev.kpemu.kprobes.events;

/**
 * A {@code b<width>@<offset>/<container>} type: {@code width} bits starting at bit
 * {@code offset} of a {@code containerBits}-wide unsigned value. Values are unsigned longs
 * as the kernel parses them (they may be huge; the kernel only checks width+offset against
 * the container with wrapping arithmetic).
 */
public record Bitfield(long width, long offset, int containerBits) {
    /** {@code lshift} of FETCH_OP_MOD_BF (kept in a byte, as in the kernel). */
    public int leftShift() { return (int) ((containerBits - (width + offset)) & 0xff); }

    /** {@code rshift} of FETCH_OP_MOD_BF. */
    public int rightShift() { return (int) ((containerBits - width) & 0xff); }

    /** {@code fetch_apply_bitfield} on a container value (only the low {@code containerBits} bits of {@code v} count). */
    public long apply(long v) {
        int l = leftShift(), r = rightShift();
        long mask = containerBits == 64 ? -1L : (1L << containerBits) - 1;
        v &= mask;
        v = (l >= 64 ? 0 : v << l) & mask;
        return r >= 64 ? 0 : v >>> r;
    }
}
