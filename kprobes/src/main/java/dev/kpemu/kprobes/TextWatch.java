package dev.kpemu.kprobes;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import dev.kpemu.unicorn.Unicorn;

/**
 * Watches guest stores to probed text: one Unicorn write hook per guest-physical page holding a
 * probed instruction. Unicorn 2.1.1 reports (and bounds) memory hooks by guest-PHYSICAL address
 * (measured: a store to a virtual alias fires the hook on the physical range and reports the
 * physical address), so the watch also sees writes through other mappings — Linux's
 * {@code text_poke} writes kernel text through a temporary alias.
 *
 * <p>The hook runs before the store lands, so it only records which probes the guest touched
 * and which breakpoint bytes it overwrote; the engine re-reads, re-decodes and re-arms them at
 * the next safe point ({@link Kprobes#syncText()}).
 *
 * <p>Cost: while any memory write hook exists, Unicorn takes its slow path for every guest store
 * (measured about 3× on a store loop), which is why the watch can be switched off.
 */
final class TextWatch {
    private static final long PAGE_MASK = ~0xfffL;

    /** Receives guest writes that overlap a probed instruction. */
    interface Listener { void onTextWrite(ProbePoint p, long physical, int size); }

    private final Unicorn uc;
    private final Listener listener;
    private final Map<Long, List<ProbePoint>> byPage = new HashMap<>();
    private final Map<Long, Unicorn.Hook> hooks = new HashMap<>();

    TextWatch(Unicorn uc, Listener listener) {
        this.uc = uc;
        this.listener = listener;
    }

    void watch(ProbePoint p, int length) {
        for (long page = p.physical & PAGE_MASK; page <= ((p.physical + length - 1) & PAGE_MASK); page += 0x1000) {
            byPage.computeIfAbsent(page, k -> new ArrayList<>()).add(p);
            if (!hooks.containsKey(page)) {
                final long pg = page;
                hooks.put(page, uc.hookMemory(Unicorn.HOOK_MEM_WRITE, pg, pg + 0xfff, (u, type, address, size, value) -> onWrite(address, size)));
            }
        }
    }

    void unwatch(ProbePoint p) {
        var it = byPage.entrySet().iterator();
        while (it.hasNext()) {
            var e = it.next();
            e.getValue().remove(p);
            if (e.getValue().isEmpty()) {
                it.remove();
                Unicorn.Hook h = hooks.remove(e.getKey());
                if (h != null) uc.delete(h);
            }
        }
    }

    int pagesWatched() { return hooks.size(); }

    private void onWrite(long address, int size) {
        List<ProbePoint> points = byPage.get(address & PAGE_MASK);
        if (points == null) return;
        for (ProbePoint p : points) {
            long len = p.end() - p.address;
            if (Long.compareUnsigned(address, p.physical + len) < 0 && Long.compareUnsigned(p.physical, address + size) < 0) {
                listener.onTextWrite(p, address, size);
            }
        }
    }
}
