package dev.kpemu.kprobes;

import java.util.ArrayList;
import java.util.List;

/**
 * Address ranges kprobes refuses (EINVAL), as the kernel's {@code kprobe_blacklist}: the guest
 * kernel's {@code NOKPROBE_SYMBOL} functions (entries of its {@code _kprobe_blacklist} section),
 * {@code .kprobes.text}, {@code .noinstr.text}, the arch entry text, and kprobes-infrastructure
 * text. The engine's handlers run on the host, so probing these cannot recurse; an explicit
 * opt-in ({@link Kprobes#allowUnsafe(boolean)}) lets them be probed anyway.
 */
public final class Blacklist {
    /** One refused range [start, end). */
    public record Range(long start, long end, String name) {
        public boolean contains(long a) {
            return Long.compareUnsigned(a, start) >= 0 && Long.compareUnsigned(a, end) < 0;
        }

        /** The debugfs {@code kprobes/blacklist} line: {@code 0x<start>-0x<end>\t<symbol>}. */
        public String line() { return String.format("0x%016x-0x%016x\t%s", start, end, name); }
    }

    private final List<Range> ranges = new ArrayList<>();

    public void add(long start, long end, String name) {
        if (Long.compareUnsigned(end, start) <= 0) throw new IllegalArgumentException("empty blacklist range " + name);
        ranges.add(new Range(start, end, name));
    }

    /**
     * Adds whole functions from their entry addresses (the {@code _kprobe_blacklist} section holds
     * one entry address per {@code NOKPROBE_SYMBOL}); each covers its symbol's extent. Entries no
     * symbol covers are skipped and counted.
     */
    public int addFunctions(long[] entries, SymbolResolver symbols) {
        int skipped = 0;
        for (long e : entries) {
            var s = symbols.lookup(e);
            if (s.isEmpty() || s.get().size() == 0) {
                skipped++;
                continue;
            }
            add(s.get().start(), s.get().start() + s.get().size(), s.get().name());
        }
        return skipped;
    }

    public Range find(long address) {
        for (Range r : ranges) if (r.contains(address)) return r;
        return null;
    }

    public List<Range> ranges() { return List.copyOf(ranges); }

    /** The debugfs {@code kprobes/blacklist} file. */
    public String debugfs() {
        StringBuilder sb = new StringBuilder();
        for (Range r : ranges) sb.append(r.line()).append('\n');
        return sb.toString();
    }
}
