package dev.kpemu.kprobes.events.hist;

import java.util.Comparator;
import java.util.List;

/**
 * Linux 6.1's {@code sort()} ({@code lib/sort.c}): the bottom-up heapsort, not stable. A hist
 * file lists entries whose sort values are equal in the order this leaves them, so kpemu sorts
 * with the same algorithm: build the heap sifting down from the middle, then repeatedly swap the
 * root to the end; each sift-down finds the path of larger children to a leaf (preferring the
 * left child on ties), then backtracks to where the element belongs and rotates it into place.
 */
final class KernelSort {
    private KernelSort() {}

    static <T> void sort(List<T> v, Comparator<? super T> cmp) {
        int num = v.size();
        int n = num, a = num / 2;
        if (a == 0) return;
        for (;;) {
            int b, c, d;
            if (a != 0) {
                a--;
            } else if (--n != 0) {
                swap(v, 0, n);
            } else {
                break;
            }
            for (b = a; (d = (c = 2 * b + 1) + 1) < n; ) b = cmp.compare(v.get(c), v.get(d)) >= 0 ? c : d;
            if (d == n) b = c;
            while (b != a && cmp.compare(v.get(a), v.get(b)) >= 0) b = (b - 1) / 2;
            c = b;
            while (b != a) {
                b = (b - 1) / 2;
                swap(v, b, c);
            }
        }
    }

    private static <T> void swap(List<T> v, int i, int j) {
        T t = v.get(i);
        v.set(i, v.get(j));
        v.set(j, t);
    }
}
