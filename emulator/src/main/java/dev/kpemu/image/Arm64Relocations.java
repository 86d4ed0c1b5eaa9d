package dev.kpemu.image;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.OptionalLong;

/**
 * The {@code R_AARCH64_RELATIVE} entries of a relocatable arm64 {@code Image}: Linux links the
 * Image with {@code --no-apply-dynamic-relocs}, so every absolute pointer in its data (tables such
 * as {@code _kprobe_blacklist}, the kallsyms base) holds 0 in the file and its link-time value is
 * the addend of the relocation whose {@code r_offset} is the pointer's address. The entries form
 * one array of {@code Elf64_Rela} ({@code r_offset, r_info = 1027, r_addend}), found by its shape.
 * (Kernels that pack relocations as RELR hold most pointers' values in place; a few stay RELA.)
 */
public final class Arm64Relocations {
    static final int R_AARCH64_RELATIVE = 1027;
    /**
     * Fewest entries of a run taken for the table: kernels that pack their relocations as RELR
     * (6.12+) keep a handful of RELA entries (seen: 7 on Debian's 6.12); a run is also required to
     * relocate kernel-half addresses, which random data does not.
     */
    private static final int MIN_ENTRIES = 4;

    private final long[] offsets;   // sorted r_offset
    private final long[] addends;   // same order

    private Arm64Relocations(long[] offsets, long[] addends) {
        this.offsets = offsets;
        this.addends = addends;
    }

    /** The longest run of consecutive RELATIVE entries in the image (none: an empty table). */
    public static Arm64Relocations of(byte[] image) {
        ByteBuffer b = ImageFiles.le(image);
        int bestStart = -1, bestLen = 0;
        for (int phase = 0; phase < 24; phase += 8) {
            int runStart = -1, runLen = 0;
            for (int p = phase; p + 24 <= image.length; p += 24) {
                if (b.getLong(p + 8) == R_AARCH64_RELATIVE && (b.getLong(p) >>> 48) == 0xffffL) {
                    if (runLen == 0) runStart = p;
                    runLen++;
                    if (runLen > bestLen) { bestLen = runLen; bestStart = runStart; }
                } else {
                    runLen = 0;
                }
            }
        }
        if (bestLen < MIN_ENTRIES) return new Arm64Relocations(new long[0], new long[0]);
        long[][] pairs = new long[bestLen][];
        for (int i = 0; i < bestLen; i++) {
            int p = bestStart + 24 * i;
            pairs[i] = new long[]{b.getLong(p), b.getLong(p + 16)};
        }
        Arrays.sort(pairs, (x, y) -> Long.compareUnsigned(x[0], y[0]));
        long[] o = new long[bestLen], a = new long[bestLen];
        for (int i = 0; i < bestLen; i++) { o[i] = pairs[i][0]; a[i] = pairs[i][1]; }
        return new Arm64Relocations(o, a);
    }

    public int size() { return offsets.length; }

    /** The link-time value of the pointer at {@code address}, if a RELATIVE relocation supplies it. */
    public OptionalLong valueAt(long address) {
        int i = indexOf(address);
        return i >= 0 ? OptionalLong.of(addends[i]) : OptionalLong.empty();
    }

    /** Index of {@code address} among the relocated pointer addresses, or a negative value. */
    int indexOf(long address) {
        int lo = 0, hi = offsets.length - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            int c = Long.compareUnsigned(offsets[mid], address);
            if (c == 0) return mid;
            if (c < 0) lo = mid + 1; else hi = mid - 1;
        }
        return -1;
    }

    long offsetAt(int i) { return offsets[i]; }
    long addendAt(int i) { return addends[i]; }

    /** Addresses of the pointers whose value is {@code value}. */
    long[] pointersTo(long value) {
        return java.util.stream.IntStream.range(0, addends.length).filter(i -> addends[i] == value).mapToLong(i -> offsets[i]).toArray();
    }
}
