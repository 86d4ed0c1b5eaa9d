package dev.kpemu.kprobes;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import dev.kpemu.machine.Machine;
import dev.kpemu.machine.TextGuard;

/**
 * Notices the guest rewriting probed text (Linux's jump labels, static calls, {@code text_poke}
 * through an alias mapping): each probed instruction is a range of the machine's
 * {@link TextGuard}, which compares it natively with what the engine left there before any block
 * containing it runs. No Unicorn memory hook is involved, so an unhit probe costs guest stores
 * and blocks nothing that grows with the number of probes (issue 12; the earlier watch, one
 * Unicorn write hook per probed page, sent every guest store down Unicorn's slow path and cost
 * about 6 ms of boot per probe).
 *
 * <p>The listener hears which bytes the guest changed; the engine then re-reads, re-decodes and
 * re-arms at the next safe point ({@link Kprobes#syncText()}). Before the engine writes over
 * probed text itself it calls {@link #settle}, so a guest write that has not run yet is adopted,
 * not overwritten.
 */
final class TextWatch {
    /** Receives guest writes that overlap a probed instruction. */
    interface Listener { void onTextWrite(ProbePoint p, long physical, int size); }

    private final Machine machine;
    private final Listener listener;
    private final Map<ProbePoint, int[]> ranges = new HashMap<>();
    private final Map<Integer, ProbePoint> byRange = new HashMap<>();

    TextWatch(Machine machine, Listener listener) {
        this.machine = machine;
        this.listener = listener;
    }

    void watch(ProbePoint p, int length) {
        if (ranges.containsKey(p)) return;
        TextGuard guard = machine.textGuard();
        List<Integer> ids = new ArrayList<>(2);
        long va = p.address, end = p.address + Math.min(length, TextGuard.MAX_RANGE);
        while (va < end) {
            long pageEnd = (va | 0xfff) + 1;
            int n = (int) (Math.min(end, pageEnd) - va);
            long pa = va == p.address ? p.physical : machine.translateOrThrow(va).physical();
            int id = guard.add(va, pa, n, this::onGuestWrite);
            ids.add(id);
            byRange.put(id, p);
            va += n;
        }
        ranges.put(p, ids.stream().mapToInt(Integer::intValue).toArray());
    }

    void unwatch(ProbePoint p) {
        int[] ids = ranges.remove(p);
        if (ids == null) return;
        for (int id : ids) {
            machine.textGuard().remove(id);
            byRange.remove(id);
        }
    }

    /** Adopts any guest write to {@code p}'s text not seen yet (the listener hears of it). */
    void settle(ProbePoint p) {
        int[] ids = ranges.get(p);
        if (ids == null) return;
        for (int id : ids) machine.textGuard().settle(id);
    }


    private void onGuestWrite(int id, long va, long pa, byte[] expected, byte[] now) {
        ProbePoint p = byRange.get(id);
        if (p == null) return;
        int i = 0;
        while (i < now.length) {
            if (now[i] == expected[i]) {
                i++;
                continue;
            }
            int j = i;
            while (j < now.length && now[j] != expected[j]) j++;
            // report in the probe's own physical terms: offset from the probe's start
            long off = va + i - p.address;
            listener.onTextWrite(p, p.physical + off, j - i);
            i = j;
        }
    }
}
