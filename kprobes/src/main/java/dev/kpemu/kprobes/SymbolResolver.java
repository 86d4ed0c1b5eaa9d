package dev.kpemu.kprobes;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;

import dev.kpemu.image.Symbol;
import dev.kpemu.image.SymbolTable;

/**
 * The guest kernel's symbols as kprobes needs them (the kernel uses kallsyms): name to address
 * for {@code symbol_name}, and address to containing symbol for the canonical {@code sym+off}
 * form, the instruction-boundary check and {@code kprobes/list}.
 */
public interface SymbolResolver {
    /** A text or data symbol with its extent [start, start + size); {@code module} is null for vmlinux. */
    record SymbolInfo(String name, long start, long size, boolean text, String module) {
        public SymbolInfo(String name, long start, long size, boolean text) { this(name, start, size, text, null); }

        public boolean contains(long address) {
            return Long.compareUnsigned(address, start) >= 0 && Long.compareUnsigned(address - start, size) < 0;
        }
    }

    OptionalLong address(String name);

    /** The symbol containing {@code address}, if any (kallsyms_lookup_size_offset). */
    Optional<SymbolInfo> lookup(long address);

    /** Adapts the kernel image's kallsyms table. */
    static SymbolResolver of(SymbolTable table) {
        return new SymbolResolver() {
            @Override public OptionalLong address(String name) {
                return table.byName(name).map(s -> OptionalLong.of(s.address())).orElse(OptionalLong.empty());
            }

            @Override public Optional<SymbolInfo> lookup(long address) {
                return table.lookup(address).map(s -> new SymbolInfo(s.name(), s.address(), s.size(), s.text()));
            }
        };
    }

    /** A resolver over explicit symbols (bare-metal guests, tests). */
    static SymbolResolver of(List<SymbolInfo> symbols) {
        List<SymbolInfo> sorted = new ArrayList<>(symbols);
        sorted.sort((a, b) -> Long.compareUnsigned(a.start(), b.start()));
        Map<String, SymbolInfo> byName = new HashMap<>();
        for (SymbolInfo s : sorted) byName.putIfAbsent(s.name(), s);
        return new SymbolResolver() {
            @Override public OptionalLong address(String name) {
                SymbolInfo s = byName.get(name);
                return s == null ? OptionalLong.empty() : OptionalLong.of(s.start());
            }

            @Override public Optional<SymbolInfo> lookup(long address) {
                SymbolInfo best = null;
                for (SymbolInfo s : sorted) if (s.contains(address)) best = s;
                return Optional.ofNullable(best);
            }
        };
    }

    /** Convenience for {@link Symbol}s from an image. */
    static SymbolInfo info(Symbol s) { return new SymbolInfo(s.name(), s.address(), s.size(), s.text()); }
}
