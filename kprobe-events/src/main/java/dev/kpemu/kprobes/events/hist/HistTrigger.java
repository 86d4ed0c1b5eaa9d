package dev.kpemu.kprobes.events.hist;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

import dev.kpemu.kprobes.events.EventFields;
import dev.kpemu.kprobes.events.GuestText;
import dev.kpemu.kprobes.events.KernelSymbols;
import dev.kpemu.kprobes.events.TraceRecord;

/**
 * One hist trigger on an event ({@code event_hist_trigger}): every record that passes the
 * trigger's filter is counted under its key, in a map of at most {@code 2^bits} entries
 * ({@code tracing_map}: a new key when it is full is dropped), and {@link #show(int)} prints what
 * the event's {@code hist} file shows: entries in the order {@code tracing_map_sort_entries}
 * leaves them (by key bytes, then {@link KernelSort} on the first sort key, then the second sort
 * key within runs of equal first keys), each key and value formatted as
 * {@code hist_trigger_entry_print} does, and the Totals.
 *
 * <p>Keys are stored as the kernel stores them, so equal sort values come out in Linux's order:
 * one number key is its 64-bit value; a string key, or several keys, make a compound key of
 * 8 bytes per number and 256 ({@code MAX_FILTER_STR_VAL}) per string, zero-padded. Before
 * sorting, the kernel's {@code detect_dups} sorts the entries by those bytes ({@code memcmp}),
 * so entries with equal sort values end up in an order fixed by their keys, not by the map.
 */
public final class HistTrigger {
    private static final int STR_SIZE = 256;

    private final HistSpec spec;
    private final KernelSymbols symbols;
    private final int keySize;
    private final java.util.Map<java.nio.ByteBuffer, Entry> map = new java.util.HashMap<>();
    private int entries;
    private long hits, drops;

    /** One map entry ({@code tracing_map_elt}): its key bytes, key values, sums (index 0 the hitcount) and the comm saved at insert. */
    private static final class Entry {
        final byte[] key;
        final Object[] keyValues;
        final long[] sums;
        final String comm;

        Entry(byte[] key, Object[] keyValues, int nVals, String comm) {
            this.key = key;
            this.keyValues = keyValues;
            this.sums = new long[nVals + 1];
            this.comm = comm;
        }
    }

    private final KernelSort.Variant sort;

    private HistTrigger(HistSpec spec, KernelSymbols symbols, KernelSort.Variant sort) {
        this.spec = spec;
        this.symbols = symbols;
        this.sort = sort;
        int size = 0;
        for (HistSpec.HistField k : spec.keys) size += k.isString() ? STR_SIZE : 8;
        this.keySize = size;
    }

    /** A trigger from the text written to the event's {@code trigger} file, on Linux 6.1. */
    public static HistTrigger parse(String text, EventFields fields, KernelSymbols symbols) throws HistTriggerException {
        return parse(text, fields, symbols, false);
    }

    /**
     * As {@link #parse(String, EventFields, KernelSymbols)}; {@code sinceLinux612}: the entries are
     * ordered by the {@code lib/sort.c} of Debian 13's 6.12 and later kernels instead of 6.1's.
     */
    public static HistTrigger parse(String text, EventFields fields, KernelSymbols symbols, boolean sinceLinux612) throws HistTriggerException {
        return new HistTrigger(HistSpec.parse(text, fields), symbols, sinceLinux612 ? KernelSort.Variant.LINUX_6_12 : KernelSort.Variant.LINUX_6_1);
    }

    /** As {@link #parse(String, EventFields, KernelSymbols)}, as the kernel of {@code dialect} parses, refuses and orders. */
    public static HistTrigger parse(String text, EventFields fields, KernelSymbols symbols, dev.kpemu.kprobes.events.Dialect dialect)
            throws HistTriggerException {
        return new HistTrigger(HistSpec.parse(text, fields, dialect.filters()), symbols,
                dialect == dev.kpemu.kprobes.events.Dialect.LINUX_6_1 ? KernelSort.Variant.LINUX_6_1 : KernelSort.Variant.LINUX_6_12);
    }

    /** The event fired: count it when it passes the trigger's filter. */
    public void accept(TraceRecord r) {
        if (spec.filter != null && !spec.filter.matches(r)) return;
        Object[] values = new Object[spec.keys.size()];
        byte[] key = new byte[keySize];
        int off = 0;
        for (int i = 0; i < values.length; i++) {
            HistSpec.HistField k = spec.keys.get(i);
            if (k.isString()) {
                String s = EventFields.string(r, k.field());
                byte[] b = GuestText.encode(s);          // the guest's bytes, as the key holds them
                int n = Math.min(b.length, STR_SIZE - 1);
                System.arraycopy(b, 0, key, off, n);
                values[i] = GuestText.decode(b, 0, n);
                off += STR_SIZE;
            } else {
                long v = EventFields.number(r, k.field());
                if ("log2".equals(k.modifier())) v = v <= 1 ? 0 : 64 - Long.numberOfLeadingZeros(v - 1);
                for (int b = 0; b < 8; b++) key[off + b] = (byte) (v >>> (8 * b));
                values[i] = v;
                off += 8;
            }
        }
        Entry e = insert(key, values, r.context().comm());
        if (e == null) return;
        e.sums[0]++;
        for (int i = 0; i < spec.vals.size(); i++) e.sums[i + 1] += EventFields.number(r, spec.vals.get(i).field());
    }

    /** {@code tracing_map_insert}: the key's entry, a new one while there is room, else a drop. */
    private Entry insert(byte[] key, Object[] values, String comm) {
        java.nio.ByteBuffer k = java.nio.ByteBuffer.wrap(key);
        Entry e = map.get(k);
        if (e == null) {
            if (entries == (1 << spec.mapBits)) {
                drops++;
                return null;
            }
            e = new Entry(key, values, spec.vals.size(), comm);
            map.put(k, e);
            entries++;
        }
        hits++;
        return e;
    }

    /** Events counted ({@code Hits}), entries, and keys dropped because the map was full. */
    public long hits() { return hits; }

    public int entries() { return entries; }

    public long drops() { return drops; }

    /** This trigger's part of the {@code hist} file ({@code hist_trigger_show}), {@code n} its index among the event's hist triggers. */
    public String show(int n) {
        StringBuilder sb = new StringBuilder();
        if (n > 0) sb.append("\n\n");
        sb.append("# event histogram\n#\n# trigger info: ").append(triggerInfo()).append('\n').append("#\n\n");
        List<Entry> list = sorted();
        for (Entry e : list) printEntry(sb, e);
        sb.append("\nTotals:\n    Hits: ").append(Long.toUnsignedString(hits)).append("\n    Entries: ").append(list.size())
                .append("\n    Dropped: ").append(Long.toUnsignedString(drops)).append('\n');
        return sb.toString();
    }

    /** The trigger file's line for it ({@code event_hist_trigger_print}). */
    public String triggerInfo() { return spec.printed() + " [active]"; }

    /** {@code tracing_map_sort_entries} (the same code in 6.1 and 6.12; their {@code sort()} differs). */
    private List<Entry> sorted() {
        List<Entry> list = new ArrayList<>(map.values());
        if (list.size() < 2) return list;
        KernelSort.sort(list, (a, b) -> Arrays.compareUnsigned(a.key, b.key), sort);   // detect_dups
        HistSpec.SortKey primary = spec.sort.getFirst();
        KernelSort.sort(list, comparator(primary), sort);
        if (spec.sort.size() > 1) sortSecondary(list, comparator(primary), comparator(spec.sort.get(1)));
        return list;
    }

    /** {@code sort_secondary}: runs of entries equal on the first key, sorted by the second. */
    private void sortSecondary(List<Entry> list, Comparator<Entry> primary, Comparator<Entry> secondary) {
        int n = list.size(), start = 0, nSub = 1;
        for (int i = 0; i < n - 1; i++) {
            if (primary.compare(list.get(i), list.get(i + 1)) == 0) {
                nSub++;
                if (i < n - 2) continue;
            }
            if (nSub < 2) {
                start = i + 1;
                nSub = 1;
                continue;
            }
            KernelSort.sort(list.subList(start, start + nSub), secondary, sort);
            start = i + 1;
            nSub = 1;
        }
    }

    /** {@code cmp_entries_key} / {@code cmp_entries_sum} with the field's {@code cmp_fn}, negated for {@code .descending}. */
    private Comparator<Entry> comparator(HistSpec.SortKey k) {
        Comparator<Entry> c;
        if (k.isKey()) {
            HistSpec.HistField f = k.field();
            int i = k.index();
            if (f.isString()) {
                c = (a, b) -> Integer.signum(compareC((String) a.keyValues[i], (String) b.keyValues[i]));
            } else {
                int size = "log2".equals(f.modifier()) ? 8 : f.field().size();
                boolean signed = f.field().signed();
                c = (a, b) -> {
                    long x = EventFields.extend((Long) a.keyValues[i], size, signed), y = EventFields.extend((Long) b.keyValues[i], size, signed);
                    return signed ? Long.compare(x, y) : Long.compareUnsigned(x, y);
                };
            }
        } else {
            int i = k.index();
            c = (a, b) -> Long.compareUnsigned(a.sums[i], b.sums[i]);
        }
        return k.descending() ? c.reversed() : c;
    }

    /** {@code strcmp} on the guest's bytes. */
    private static int compareC(String a, String b) {
        return Arrays.compareUnsigned(GuestText.encode(a), GuestText.encode(b));
    }

    /** The kernel's {@code %-Ns}: {@code s} padded to {@code width} bytes of the guest's (not chars). */
    private static String padBytes(String s, int width) {
        int n = GuestText.encode(s).length;
        return n >= width ? s : s + " ".repeat(width - n);
    }

    /** {@code hist_trigger_entry_print}. */
    private void printEntry(StringBuilder sb, Entry e) {
        sb.append("{ ");
        for (int i = 0; i < spec.keys.size(); i++) {
            HistSpec.HistField k = spec.keys.get(i);
            if (i > 0) sb.append(", ");
            String name = k.name();
            Object v = e.keyValues[i];
            if (k.isString()) {
                sb.append(name).append(": ").append(padBytes((String) v, 50));
                continue;
            }
            long u = (Long) v;
            String mod = k.modifier() == null ? "" : k.modifier();
            switch (mod) {
                case "hex" -> sb.append(name).append(": ").append(Long.toHexString(u));
                case "sym" -> sb.append(String.format("%s: [%x] %-45s", name, u, symbolName(u)));
                case "sym-offset" -> sb.append(String.format("%s: [%x] %-55s", name, u, symbols.sprintSymbol(u)));
                case "execname" -> sb.append(name).append(": ").append(padBytes(e.comm, 16)).append(String.format("[%10s]", Long.toUnsignedString(u)));
                case "log2" -> sb.append(String.format("%s: ~ 2^%-2s", name, Long.toUnsignedString(u)));
                default -> sb.append(String.format("%s: %10s", name, Long.toUnsignedString(u)));
            }
        }
        sb.append(" }");
        sb.append(String.format(" hitcount: %10s", Long.toUnsignedString(e.sums[0])));
        for (int i = 0; i < spec.vals.size(); i++) {
            HistSpec.HistField f = spec.vals.get(i);
            long s = e.sums[i + 1];
            sb.append(' ').append(String.format(" %s: %10s", f.name(), "hex".equals(f.modifier()) ? Long.toHexString(s) : Long.toUnsignedString(s)));
        }
        sb.append('\n');
    }

    /** {@code %ps}: the symbol's name, or the address as {@code 0x...} when no symbol holds it. */
    private String symbolName(long address) {
        return symbols.symbolAt(address).map(KernelSymbols.Symbol::name).filter(n -> !n.isEmpty())
                .orElse("0x" + Long.toHexString(address));
    }
}
