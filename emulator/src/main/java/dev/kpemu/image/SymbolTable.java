package dev.kpemu.image;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.function.LongFunction;

/**
 * The kernel's symbols, in ascending address order (the order of the kallsyms tables), with
 * lookup by name and by address and the kernel's {@code sym+0xoff/0xsize} formatting.
 */
public final class SymbolTable {
    private final List<Symbol> symbols;
    private final long[] addresses;
    private final Map<String, List<Symbol>> byName;
    private final LongFunction<OptionalLong> fileOffsets;
    private final long linkBase;
    private final String source;
    /** {@code is_ksym_addr}: the address ranges kallsyms resolves (empty: no bounds known, all). */
    private final long[][] ksymRanges;

    SymbolTable(List<Symbol> sortedSymbols, long linkBase, LongFunction<OptionalLong> fileOffsets, String source) {
        this.symbols = Collections.unmodifiableList(new ArrayList<>(sortedSymbols));
        this.addresses = new long[symbols.size()];
        this.byName = new HashMap<>(symbols.size() * 2);
        for (int i = 0; i < symbols.size(); i++) {
            Symbol s = symbols.get(i);
            addresses[i] = s.address();
            byName.computeIfAbsent(s.name(), k -> new ArrayList<>(1)).add(s);
        }
        this.linkBase = linkBase;
        this.fileOffsets = fileOffsets;
        this.source = source;
        this.ksymRanges = ksymRanges();
    }

    /**
     * Linux's {@code is_ksym_addr}: with CONFIG_KALLSYMS_ALL (the table holds data symbols) the
     * kernel image [_stext, _end) and the init sections [__init_begin, __init_end); without it,
     * text [_stext, _etext) and init text [_sinittext, _einittext). Other addresses (per-CPU
     * offsets, the image header before _stext, user addresses, small numbers) resolve to nothing.
     */
    private long[][] ksymRanges() {
        // A table built with CONFIG_KALLSYMS_ALL holds thousands of data symbols; one without it
        // still shows a few section markers as data (arm64 6.1: _etext is 'D'), which must not
        // make rodata addresses resolve to "_etext+0x40e00/0x960000" where Linux prints hex.
        int data = 0;
        for (Symbol x : symbols) {
            char t = Character.toLowerCase(x.type());
            if (t == 'd' || t == 'b' || t == 'r') data++;
        }
        boolean all = data >= 100;
        List<long[]> r = new ArrayList<>();
        if (all) {
            range(r, "_stext", "_end");
            range(r, "__init_begin", "__init_end");
        } else {
            range(r, "_stext", "_etext");
            range(r, "_sinittext", "_einittext");
        }
        return r.toArray(long[][]::new);
    }

    private void range(List<long[]> out, String start, String end) {
        List<Symbol> a = byName.get(start), z = byName.get(end);
        if (a != null && z != null) out.add(new long[]{a.get(0).address(), z.get(0).address()});
    }

    /** Whether kallsyms resolves {@code address} at all ({@code is_ksym_addr}). */
    public boolean isKsymAddress(long address) {
        if (ksymRanges.length == 0) return true;
        for (long[] r : ksymRanges) {
            if (Long.compareUnsigned(address, r[0]) >= 0 && Long.compareUnsigned(address, r[1]) < 0) return true;
        }
        return false;
    }

    /** Builds a table from symbols in any order; sizes are recomputed from the address order. */
    public static SymbolTable of(List<Symbol> symbols, long linkBase, LongFunction<OptionalLong> fileOffsets, String source) {
        List<Symbol> sorted = new ArrayList<>(symbols);
        sorted.sort((a, b) -> Long.compareUnsigned(a.address(), b.address()));
        return new SymbolTable(withSizes(sorted), linkBase, fileOffsets, source);
    }

    /** Sizes: distance to the next strictly higher address; aliases share it; the last gets 0. */
    static List<Symbol> withSizes(List<Symbol> sorted) {
        List<Symbol> out = new ArrayList<>(sorted.size());
        int n = sorted.size();
        int i = 0;
        while (i < n) {
            long a = sorted.get(i).address();
            int j = i;
            while (j < n && sorted.get(j).address() == a) j++;
            long size = j < n ? sorted.get(j).address() - a : 0;
            for (int k = i; k < j; k++) {
                Symbol s = sorted.get(k);
                out.add(new Symbol(s.name(), a, s.type(), size));
            }
            i = j;
        }
        return out;
    }

    public int size() { return symbols.size(); }
    public List<Symbol> symbols() { return symbols; }
    /** Where the table came from (file name). */
    public String source() { return source; }

    /** Link-time virtual address of the start of the image (x86-64: _text; arm64: Image offset 0). */
    public long linkBase() { return linkBase; }

    public Optional<Symbol> byName(String name) {
        List<Symbol> l = byName.get(name);
        return l == null ? Optional.empty() : Optional.of(l.get(0));
    }

    public List<Symbol> allByName(String name) { return byName.getOrDefault(name, List.of()); }

    /** The address of a symbol; throws NoSuchElementException naming it when absent. */
    public long address(String name) {
        return byName(name).orElseThrow(() -> new NoSuchElementException("no kernel symbol '" + name + "' in " + source)).address();
    }

    /**
     * The symbol an address belongs to, as the kernel's kallsyms_lookup finds it: only for
     * addresses kallsyms resolves ({@link #isKsymAddress}), the highest symbol address at or
     * below {@code address} (the first of several aliases). Empty below the first symbol or past
     * the last one's end.
     */
    public Optional<Symbol> lookup(long address) {
        if (!isKsymAddress(address)) return Optional.empty();
        int lo = 0, hi = addresses.length - 1, found = -1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            if (Long.compareUnsigned(addresses[mid], address) <= 0) { found = mid; lo = mid + 1; } else hi = mid - 1;
        }
        if (found < 0) return Optional.empty();
        while (found > 0 && addresses[found - 1] == addresses[found]) found--;
        Symbol s = symbols.get(found);
        if (s.size() == 0 && address != s.address()) return Optional.empty();
        return Optional.of(s);
    }

    /** {@code do_sys_openat2+0x0/0x190}, or {@code 0x...} for an address no symbol covers. */
    public String format(long address) {
        return lookup(address)
                .map(s -> String.format("%s+0x%x/0x%x", s.name(), address - s.address(), s.size()))
                .orElse("0x" + Long.toHexString(address));
    }

    /** File offset in the kernel image (arm64 Image / x86 vmlinux ELF) holding an address's bytes. */
    public OptionalLong fileOffset(long address) { return fileOffsets.apply(address); }

    @Override
    public String toString() { return "SymbolTable[" + source + ", " + size() + " symbols, base 0x" + Long.toHexString(linkBase) + "]"; }
}
