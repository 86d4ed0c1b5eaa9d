package dev.kpemu.machine;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Guest text the host has patched (breakpoints, jumps) and must notice the guest rewriting:
 * short byte ranges, each with the bytes the host last left there. The check is native, in the
 * instruction clock's translation hook ({@code kpemu_clock.c}): Unicorn translates a block again
 * before it runs whenever a guest store changed its bytes (through any alias), and when it
 * translates a block that contains a guarded range, guest memory is compared with those bytes; on
 * a difference the engine stops before the block and {@link Machine#run} hands the range to the
 * {@link Listener}. No Unicorn memory hook exists, so guest loads and stores keep Unicorn's fast
 * path, and running a block costs the same with 0 or 10,000 ranges: only translation looks, one
 * test of the {@link GranuleBitmap}, whose bits this guard sets for the 32-byte granules a range
 * touches; only a block whose granules have a bit set looks its page up in the hash table.
 *
 * <p>Host writes through {@link GuestMemory} update the expected bytes of the ranges they touch,
 * so only the guest's own stores show up as differences (a host that rewrites text drops its
 * translations itself: {@link Machine#invalidateCode}). A guest store to guarded text is seen
 * when the rewritten text is about to run, or when the host asks with {@link #settle}.
 */
public final class TextGuard implements AutoCloseable {
    /** Bytes one range can hold (KPEMU_GUARD_MAX in kpemu_clock.c). */
    public static final int MAX_RANGE = 16;
    private static final int BUCKETS = 4096;
    // struct kpemu_guard
    private static final long LIVE = 0, HIT = 4, CHECKS = 8, ENTRIES = 16, BUCKET0 = 24;
    // struct kpemu_guard_entry
    private static final long E_VA = 0, E_PA = 8, E_LEN = 16, E_NEXT = 20, E_EXPECT = 24, ENTRY_SIZE = 40;

    /** Told about a guarded range whose guest bytes differ from what the host left there. */
    public interface Listener {
        /** @param expected what the host left; @param now what guest memory holds (the new expectation) */
        void onGuestWrite(int id, long va, long pa, byte[] expected, byte[] now);
    }

    private final Arena arena = Arena.ofShared();
    private final GuestMemory memory;
    private final MemorySegment state;
    private MemorySegment entries;
    private int capacity;
    private int used;
    private final List<Integer> free = new ArrayList<>();
    private final Map<Long, List<Integer>> byPhysicalPage = new HashMap<>();
    private final Map<Integer, Listener> listeners = new HashMap<>();
    /** The clock's granule bitmap: the ranges mark their granules there. */
    private final GranuleBitmap bitmap;

    TextGuard(GuestMemory memory, GranuleBitmap bitmap) {
        this.memory = memory;
        this.bitmap = bitmap;
        this.state = arena.allocate(BUCKET0 + 4L * BUCKETS, 16);
        state.fill((byte) 0);
        for (int b = 0; b < BUCKETS; b++) state.set(JAVA_INT, BUCKET0 + 4L * b, -1);
        grow(256);
    }

    MemorySegment nativeState() { return state; }

    /** Counts the range [va, va + len) in (delta 1) or out of (delta -1) the bits of its granules. */
    private void mark(long va, int len, int delta) {
        bitmap.mark(va, len, delta);
    }

    private void grow(int newCapacity) {
        MemorySegment bigger = arena.allocate(ENTRY_SIZE * newCapacity, 16);
        bigger.fill((byte) 0);
        if (entries != null) MemorySegment.copy(entries, 0, bigger, 0, ENTRY_SIZE * capacity);
        entries = bigger;
        capacity = newCapacity;
        state.set(ADDRESS, ENTRIES, entries);
    }

    private static int bucket(long page) { return (int) ((page ^ (page >>> 12)) & (BUCKETS - 1)); }

    /**
     * Guards {@code len} bytes at guest-virtual {@code va} (guest-physical {@code pa}); the range
     * must lie in one 4 KiB page. The expected bytes are what memory holds now. Returns the id.
     */
    public int add(long va, long pa, int len, Listener listener) {
        if (len <= 0 || len > MAX_RANGE) throw new IllegalArgumentException("a guarded range is 1.." + MAX_RANGE + " bytes: " + len);
        if ((va >>> 12) != ((va + len - 1) >>> 12)) throw new IllegalArgumentException(String.format("range at 0x%x crosses a page", va));
        int id;
        if (!free.isEmpty()) {
            id = free.removeLast();
        } else {
            if (used == capacity) grow(capacity * 2);
            id = used++;
            long e = ENTRY_SIZE * id;
            int b = bucket(va >>> 12);
            entries.set(JAVA_INT, e + E_NEXT, state.get(JAVA_INT, BUCKET0 + 4L * b));
            state.set(JAVA_INT, BUCKET0 + 4L * b, id);
        }
        long e = ENTRY_SIZE * id;
        // a reused entry stays in the bucket of its first page: re-link it when the page differs
        long oldVa = entries.get(JAVA_LONG, e + E_VA);
        if (id < used && oldVa != 0 && bucket(oldVa >>> 12) != bucket(va >>> 12)) relink(id, oldVa, va);
        entries.set(JAVA_LONG, e + E_VA, va);
        entries.set(JAVA_LONG, e + E_PA, pa);
        setExpected(id, memory.read(pa, len));
        entries.set(JAVA_INT, e + E_LEN, len);
        mark(va, len, 1);
        byPhysicalPage.computeIfAbsent(pa >>> 12, k -> new ArrayList<>()).add(id);
        growSpan(pa, len);
        listeners.put(id, listener);
        state.set(JAVA_INT, LIVE, state.get(JAVA_INT, LIVE) + 1);
        return id;
    }

    private void relink(int id, long oldVa, long newVa) {
        // unlink from the old bucket's chain
        int ob = bucket(oldVa >>> 12);
        long head = BUCKET0 + 4L * ob;
        int prev = -1, i = state.get(JAVA_INT, head);
        while (i >= 0 && i != id) {
            prev = i;
            i = entries.get(JAVA_INT, ENTRY_SIZE * i + E_NEXT);
        }
        int next = entries.get(JAVA_INT, ENTRY_SIZE * id + E_NEXT);
        if (prev < 0) state.set(JAVA_INT, head, next);
        else entries.set(JAVA_INT, ENTRY_SIZE * prev + E_NEXT, next);
        int nb = bucket(newVa >>> 12);
        entries.set(JAVA_INT, ENTRY_SIZE * id + E_NEXT, state.get(JAVA_INT, BUCKET0 + 4L * nb));
        state.set(JAVA_INT, BUCKET0 + 4L * nb, id);
    }

    private long spanLow = -1, spanHigh = 0;
    private Runnable spanGrown = () -> {};

    /** Called (by the machine) whenever {@link #physicalSpanLow}..{@link #physicalSpanHigh} grows. */
    void onSpanGrown(Runnable r) { spanGrown = r; }

    private void growSpan(long pa, int len) {
        long low = pa & ~0xfffL, high = (pa + len + 0xfff) & ~0xfffL;
        if (spanHigh != 0 && Long.compareUnsigned(low, spanLow) >= 0 && Long.compareUnsigned(high, spanHigh) <= 0) return;
        spanLow = spanHigh == 0 ? low : Math.min(spanLow, low);
        spanHigh = Math.max(spanHigh, high);
        spanGrown.run();
    }

    /**
     * The guest-physical pages every range ever guarded lies in, {@code [low, high)} (never shrinks;
     * empty: 0, 0): a native hook that writes guest memory (an x86 exception frame) leaves a write
     * there to the host path, whose writes update the expected bytes.
     */
    public long physicalSpanLow() { return spanHigh == 0 ? 0 : spanLow; }

    public long physicalSpanHigh() { return spanHigh; }

    /** Stops guarding range {@code id}. */
    public void remove(int id) {
        long e = ENTRY_SIZE * id;
        int len = entries.get(JAVA_INT, e + E_LEN);
        if (len == 0) return;
        entries.set(JAVA_INT, e + E_LEN, 0);
        mark(entries.get(JAVA_LONG, e + E_VA), len, -1);
        long pa = entries.get(JAVA_LONG, e + E_PA);
        List<Integer> l = byPhysicalPage.get(pa >>> 12);
        if (l != null) {
            l.remove((Integer) id);
            if (l.isEmpty()) byPhysicalPage.remove(pa >>> 12);
        }
        listeners.remove(id);
        free.add(id);
        state.set(JAVA_INT, LIVE, state.get(JAVA_INT, LIVE) - 1);
    }

    /** Ranges guarded now. */
    public int size() { return state.get(JAVA_INT, LIVE); }

    /** Memory comparisons the native check has made (blocks that contained a guarded range). */
    public long checks() { return state.get(JAVA_LONG, CHECKS); }

    public byte[] expected(int id) {
        long e = ENTRY_SIZE * id;
        byte[] b = new byte[entries.get(JAVA_INT, e + E_LEN)];
        MemorySegment.copy(entries, JAVA_BYTE, e + E_EXPECT, b, 0, b.length);
        return b;
    }

    private void setExpected(int id, byte[] bytes) {
        MemorySegment.copy(bytes, 0, entries, JAVA_BYTE, ENTRY_SIZE * id + E_EXPECT, bytes.length);
    }

    /**
     * Compares range {@code id} with guest memory now; on a difference the listener hears of it
     * and memory becomes the expectation. Call before the host writes over guarded text, so no
     * guest write is lost under the host's. Returns true when the guest had changed the range.
     */
    public boolean settle(int id) {
        long e = ENTRY_SIZE * id;
        int len = entries.get(JAVA_INT, e + E_LEN);
        if (len == 0) return false;
        long pa = entries.get(JAVA_LONG, e + E_PA);
        byte[] now = memory.read(pa, len);
        byte[] was = expected(id);
        if (java.util.Arrays.equals(now, was)) return false;
        setExpected(id, now);
        Listener l = listeners.get(id);
        if (l != null) l.onGuestWrite(id, entries.get(JAVA_LONG, e + E_VA), pa, was, now);
        return true;
    }

    /** The range the native check stopped on (and clears it), or -1. */
    int takeHit() {
        int hit = state.get(JAVA_INT, HIT);
        if (hit == 0) return -1;
        state.set(JAVA_INT, HIT, 0);
        return hit - 1;
    }

    /** A host write of {@code len} bytes at guest-physical {@code pa}: the ranges it touches expect the new bytes. */
    void afterHostWrite(long pa, int len) {
        if (byPhysicalPage.isEmpty() || len <= 0) return;
        for (long page = pa >>> 12; page <= (pa + len - 1) >>> 12; page++) {
            List<Integer> ids = byPhysicalPage.get(page);
            if (ids == null) continue;
            for (int id : ids) {
                long e = ENTRY_SIZE * id;
                long rpa = entries.get(JAVA_LONG, e + E_PA);
                int rlen = entries.get(JAVA_INT, e + E_LEN);
                if (rpa < pa + len && pa < rpa + rlen) setExpected(id, memory.read(rpa, rlen));
            }
        }
    }

    @Override public void close() { arena.close(); }
}
