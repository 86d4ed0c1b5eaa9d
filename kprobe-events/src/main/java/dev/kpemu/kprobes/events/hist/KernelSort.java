package dev.kpemu.kprobes.events.hist;

import java.util.Comparator;
import java.util.List;

/**
 * Linux's {@code sort()} ({@code lib/sort.c}), a heapsort, not stable: a hist file lists entries
 * whose sort values are equal in the order it leaves them, so kpemu sorts with the same
 * algorithm as the booted kernel.
 * <ul>
 * <li>{@link Variant#LINUX_6_1}: bottom-up heapsort — build the heap sifting down from the
 *     middle, then repeatedly swap the root to the end; each sift-down follows the larger child
 *     (the left one on ties) to a leaf, then backtracks to where the element belongs.</li>
 * <li>{@link Variant#LINUX_6_12} (Debian 13's 6.12 and later, read from 6.12's source): the
 *     sift-down prefers the right child on ties, and the sorting phase takes two elements per
 *     round (the root, then the larger of its children), ending with a compare of the last two.</li>
 * </ul>
 */
final class KernelSort {
    private KernelSort() {}

    /** Which kernel's {@code lib/sort.c}. */
    enum Variant { LINUX_6_1, LINUX_6_12 }

    static <T> void sort(List<T> v, Comparator<? super T> cmp, Variant variant) {
        if (variant == Variant.LINUX_6_1) sort61(v, cmp);
        else sort612(v, cmp);
    }

    private static <T> void sort61(List<T> v, Comparator<? super T> cmp) {
        int num = v.size();
        int n = num, a = num / 2;
        if (a == 0) return;
        for (;;) {
            if (a != 0) {
                a--;
            } else if (--n != 0) {
                swap(v, 0, n);
            } else {
                break;
            }
            siftDown(v, cmp, a, n, false);
        }
    }

    private static <T> void sort612(List<T> v, Comparator<? super T> cmp) {
        int num = v.size();
        int n = num, a = num / 2, shift = 0;
        if (a == 0) return;
        for (;;) {
            if (a != 0) {
                a -= 1 << shift;
            } else if (n > 3) {
                swap(v, 0, --n);
                shift = cmp.compare(v.get(1), v.get(2)) <= 0 ? 1 : 0;
                a = 1 << shift;
                swap(v, a, --n);
            } else {
                break;
            }
            siftDown(v, cmp, a, n, true);
        }
        swap(v, 0, --n);
        if (n == 2 && cmp.compare(v.get(0), v.get(1)) > 0) swap(v, 0, 1);
    }

    /** Sifts element {@code a} down the heap of the first {@code n}; ties go right when {@code rightOnTies}. */
    private static <T> void siftDown(List<T> v, Comparator<? super T> cmp, int a, int n, boolean rightOnTies) {
        int b, c, d;
        for (b = a; (d = (c = 2 * b + 1) + 1) < n; ) {
            int r = cmp.compare(v.get(c), v.get(d));
            b = (rightOnTies ? r > 0 : r >= 0) ? c : d;
        }
        if (d == n) b = c;
        while (b != a && cmp.compare(v.get(a), v.get(b)) >= 0) b = (b - 1) / 2;
        c = b;
        while (b != a) {
            b = (b - 1) / 2;
            swap(v, b, c);
        }
    }

    private static <T> void swap(List<T> v, int i, int j) {
        T t = v.get(i);
        v.set(i, v.get(j));
        v.set(j, t);
    }
}
