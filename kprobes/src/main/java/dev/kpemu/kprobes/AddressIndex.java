package dev.kpemu.kprobes;

import java.util.Arrays;

/**
 * Values by guest address, for the lookups a probe hit makes (the probe point at the trapped
 * address, an optimized site's detour): open addressing on a primitive key, so a lookup boxes
 * nothing and reads two arrays. A {@code HashMap<Long, V>} boxed the address at every hit, and
 * kernel addresses (aligned, in one region) made long chains that it turned into trees: 0.2 µs of
 * a job's event under the client compiler (docs/reference.md). Not thread-safe: the engine's
 * thread owns it, as it owns the maps it sits beside.
 */
public final class AddressIndex<V> {
    private static final int MIN_CAPACITY = 16;

    private long[] keys = new long[MIN_CAPACITY];
    private Object[] values = new Object[MIN_CAPACITY];
    private int size;

    /** The value at {@code address}, or null. */
    @SuppressWarnings("unchecked")
    public V get(long address) {
        long[] k = keys;
        Object[] v = values;
        int mask = k.length - 1;
        for (int i = slot(address, mask); ; i = (i + 1) & mask) {
            Object x = v[i];
            if (x == null) return null;
            if (k[i] == address) return (V) x;
        }
    }

    /** Sets the value at {@code address} (not null); returns the previous one or null. */
    @SuppressWarnings("unchecked")
    public V put(long address, V value) {
        if (value == null) throw new NullPointerException("value");
        if ((size + 1) * 4 > keys.length * 3) grow();
        int mask = keys.length - 1;
        for (int i = slot(address, mask); ; i = (i + 1) & mask) {
            Object x = values[i];
            if (x == null) {
                keys[i] = address;
                values[i] = value;
                size++;
                return null;
            }
            if (keys[i] == address) {
                values[i] = value;
                return (V) x;
            }
        }
    }

    /** Removes the value at {@code address}; returns it, or null when there was none. */
    @SuppressWarnings("unchecked")
    public V remove(long address) {
        int mask = keys.length - 1;
        int i = slot(address, mask);
        while (true) {
            Object x = values[i];
            if (x == null) return null;
            if (keys[i] == address) break;
            i = (i + 1) & mask;
        }
        V old = (V) values[i];
        // backward-shift deletion: later entries of the run move into the gap when their home allows it
        int gap = i;
        for (int j = (gap + 1) & mask; values[j] != null; j = (j + 1) & mask) {
            int home = slot(keys[j], mask);
            boolean movable = gap <= j ? (home <= gap || home > j) : (home <= gap && home > j);
            if (movable) {
                keys[gap] = keys[j];
                values[gap] = values[j];
                gap = j;
            }
        }
        keys[gap] = 0;
        values[gap] = null;
        size--;
        return old;
    }

    public int size() { return size; }

    public void clear() {
        Arrays.fill(keys, 0);
        Arrays.fill(values, null);
        size = 0;
    }

    private void grow() {
        long[] oldKeys = keys;
        Object[] oldValues = values;
        keys = new long[oldKeys.length * 2];
        values = new Object[oldKeys.length * 2];
        size = 0;
        for (int i = 0; i < oldKeys.length; i++) {
            if (oldValues[i] != null) {
                @SuppressWarnings("unchecked") V v = (V) oldValues[i];
                put(oldKeys[i], v);
            }
        }
    }

    /** The home slot: the address's bits mixed (a multiply and a shift, as Fibonacci hashing does). */
    private static int slot(long address, int mask) {
        long h = address * 0x9E37_79B9_7F4A_7C15L;
        return (int) (h ^ (h >>> 32)) & mask;
    }
}
