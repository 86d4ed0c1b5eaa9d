package dev.kpemu.kprobes;

import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

import dev.kpemu.image.KernelTextTables.Range;

/**
 * A fixed list of address ranges searched by address in logarithmic time: the first range (in
 * list order) that contains the address, as a linear scan of the list would find it. Ranges may
 * overlap and differ in size (a blacklisted function, a 5-byte jump-label site). Registering
 * thousands of probes checked each one against every jump-label, static-call and blacklist entry
 * of the kernel; this is that check without the scan.
 */
final class RangeIndex {
    private final Range[] byStart;
    private final int[] order;       // the list index of byStart[i]
    private final long[] maxEnd;     // the largest end (unsigned) among byStart[0..i]

    RangeIndex(List<Range> ranges) {
        Integer[] idx = new Integer[ranges.size()];
        for (int i = 0; i < idx.length; i++) idx[i] = i;
        Arrays.sort(idx, Comparator.comparing((Integer i) -> ranges.get(i).start(), Long::compareUnsigned));
        byStart = new Range[idx.length];
        order = new int[idx.length];
        maxEnd = new long[idx.length];
        long m = 0;
        for (int i = 0; i < idx.length; i++) {
            byStart[i] = ranges.get(idx[i]);
            order[i] = idx[i];
            if (Long.compareUnsigned(byStart[i].end(), m) > 0) m = byStart[i].end();
            maxEnd[i] = m;
        }
    }

    /** The first range of the list that contains {@code address}, or null. */
    Range find(long address) {
        int lo = 0, hi = byStart.length - 1, last = -1;      // last range starting at or below address
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            if (Long.compareUnsigned(byStart[mid].start(), address) <= 0) {
                last = mid;
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        Range best = null;
        int bestOrder = Integer.MAX_VALUE;
        for (int i = last; i >= 0 && Long.compareUnsigned(maxEnd[i], address) > 0; i--) {
            if (byStart[i].contains(address) && order[i] < bestOrder) {
                best = byStart[i];
                bestOrder = order[i];
            }
        }
        return best;
    }
}
