package dev.kpemu.kprobes.events;

import java.util.Optional;
import java.util.OptionalLong;

import dev.kpemu.image.SymbolTable;

/**
 * {@link KernelSymbols} over the kallsyms tables decoded from a kernel image (vmlinux only: the
 * default guests load no modules). A function entry is offset 0 of a text symbol, or up to 4
 * bytes past it on an x86 kernel built with IBT, where the entry may be the instruction after
 * {@code endbr64} (as {@code arch_kprobe_on_func_entry} allows).
 */
public final class KallsymsSymbols implements KernelSymbols {
    private final SymbolTable table;
    private final int entryWindow;

    /** @param entryWindow bytes past a symbol that still count as its entry (4 on x86 with IBT, else 0) */
    public KallsymsSymbols(SymbolTable table, int entryWindow) {
        this.table = table;
        this.entryWindow = entryWindow;
    }

    public SymbolTable table() { return table; }

    @Override public int countSymbols(String name) {
        int colon = name.indexOf(':');
        return colon >= 0 ? 0 : table.allByName(name).size();
    }

    @Override public FuncEntry funcEntry(String symbol, long offset) {
        if (symbol.indexOf(':') >= 0) return FuncEntry.NOT_FOUND; // no modules in the image
        var s = table.byName(symbol);
        if (s.isEmpty()) return FuncEntry.NOT_FOUND;
        return offset >= 0 && offset <= entryWindow ? FuncEntry.ENTRY : FuncEntry.NOT_ENTRY;
    }

    @Override public OptionalLong lookupName(String name) {
        var s = table.byName(name);
        return s.isPresent() ? OptionalLong.of(s.get().address()) : OptionalLong.empty();
    }

    @Override public Optional<Symbol> symbolAt(long address) {
        return table.lookup(address).map(s -> new Symbol(s.name(), s.address(), s.size(), null));
    }
}
