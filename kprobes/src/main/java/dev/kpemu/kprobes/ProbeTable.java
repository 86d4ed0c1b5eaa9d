package dev.kpemu.kprobes;

import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

/**
 * The engine's registry: every probe point by address (the kernel's {@code kprobe_table}, an
 * aggregate counting once), the same points in address order, and the addresses that ever held
 * a probe (a breakpoint removed while a vCPU was about to hit it still traps there).
 */
final class ProbeTable {
    final Map<Long, ProbePoint> points = new LinkedHashMap<>();
    /** The same points for a hit's lookup by trapped address (no boxing): kept with {@link #points}. */
    final AddressIndex<ProbePoint> atAddress = new AddressIndex<>();
    /** The same points by address (unsigned order), for the text around an address. */
    final NavigableMap<Long, ProbePoint> byAddress = new TreeMap<>(Long::compareUnsigned);
    final Map<Long, ProbePoint> stepTraps = new HashMap<>();
    final Set<Long> formerProbeAddresses = new HashSet<>();
    private long sequence;

    /** Registration order of a new point ({@code kprobes/list} lists newer points of a bucket first). */
    long nextSequence() { return sequence++; }

    /** Every probe address, copied (callers may change the table while walking it). */
    List<Long> addresses() { return List.copyOf(points.keySet()); }

    /** The registered probe at an address ({@code get_kprobe}), newest child first. */
    List<Kprobe> probesAt(long address) {
        ProbePoint p = points.get(address);
        return p == null ? List.of() : List.copyOf(p.children);
    }

    /** True when the breakpoint at {@code address} is in guest memory. */
    boolean isArmed(long address) {
        ProbePoint p = points.get(address);
        return p != null && p.armed;
    }

    /** The original bytes kept for the probe at {@code address}. */
    Optional<byte[]> savedBytes(long address) {
        ProbePoint p = points.get(address);
        return p == null ? Optional.empty() : Optional.of(p.saved.clone());
    }

    /** True when the probe at {@code address} runs a copy from a slot with a jump back (boosted). */
    boolean isBoosted(long address) {
        ProbePoint p = points.get(address);
        return p != null && p.boosted;
    }
}
