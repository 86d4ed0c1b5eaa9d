package dev.kpemu.kprobes.events;

import java.util.ArrayList;
import java.util.List;

import dev.kpemu.machine.Machine;
import dev.kpemu.machine.WatchHit;
import dev.kpemu.machine.Watchpoints;

/**
 * A kernel-virtual range watched on the machine ({@link Watchpoints} watches physical ranges): the
 * range is translated through the guest's current page tables when it is installed, page by page,
 * one watch per physically contiguous piece (a watch follows the physical page, as a hardware
 * watchpoint set on that mapping would while the mapping stays), and each hit is given back with
 * the virtual address it touched.
 */
public final class WatchedRange {
    /** A hit with the kernel-virtual address of the access's first byte. */
    public interface Handler {
        void hit(WatchHit hit, long virtualAddress);
    }

    private record Piece(long va, long pa, long length) {}

    private static final long PAGE = 4096;
    private final Watchpoints watchpoints;
    private final List<Watchpoints.Watch> watches = new ArrayList<>();

    private WatchedRange(Watchpoints watchpoints) {
        this.watchpoints = watchpoints;
    }

    /**
     * Watches {@code [va, va + length)}.
     *
     * @throws IllegalArgumentException when a page of the range is not mapped or not RAM (one line)
     */
    public static WatchedRange install(Machine machine, long va, long length, boolean reads, boolean writes, boolean afterAccess,
                                Handler handler) {
        List<Piece> pieces = new ArrayList<>();
        long at = va, end = va + length;
        while (Long.compareUnsigned(at, end) < 0) {
            long pa;
            try {
                pa = machine.translateOrThrow(at).physical();
            } catch (Machine.GuestMemoryException e) {
                throw new IllegalArgumentException("address 0x" + Long.toHexString(at) + " is not mapped in the guest's page tables");
            }
            long n = Math.min(end - at, PAGE - (at & (PAGE - 1)));
            Piece last = pieces.isEmpty() ? null : pieces.getLast();
            if (last != null && last.pa() + last.length() == pa) pieces.set(pieces.size() - 1, new Piece(last.va(), last.pa(), last.length() + n));
            else pieces.add(new Piece(at, pa, n));
            at += n;
        }
        WatchedRange r = new WatchedRange(machine.watchpoints());
        try {
            for (Piece p : pieces)
                r.watches.add(r.watchpoints.add(p.pa(), p.length(), reads, writes, afterAccess,
                        hit -> handler.hit(hit, p.va() + (hit.physicalAddress() - p.pa()))));
        } catch (IllegalArgumentException e) {
            r.remove();
            throw e;
        }
        return r;
    }

    /** Stops watching. */
    public void remove() {
        for (Watchpoints.Watch w : watches) watchpoints.remove(w);
        watches.clear();
    }
}
