package dev.kpemu.optprobes;

/**
 * A half-open range of guest addresses {@code [start, end)}.
 *
 * @param start first address
 * @param end   address just past the range
 */
public record TextRange(long start, long end) {

    public TextRange {
        if (Long.compareUnsigned(end, start) < 0) {
            throw new IllegalArgumentException(String.format("range end %#x before start %#x", end, start));
        }
    }

    /** The range of {@code length} bytes at {@code start}. */
    public static TextRange of(long start, long length) {
        return new TextRange(start, start + length);
    }

    /** True if {@code address} lies in the range. */
    public boolean contains(long address) {
        return Long.compareUnsigned(address, start) >= 0 && Long.compareUnsigned(address, end) < 0;
    }

    /** True if the two ranges share at least one byte. */
    public boolean overlaps(TextRange o) {
        return Long.compareUnsigned(start, o.end) < 0 && Long.compareUnsigned(o.start, end) < 0;
    }

    @Override
    public String toString() {
        return String.format("[%#x, %#x)", start, end);
    }
}
