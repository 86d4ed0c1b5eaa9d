package dev.kpemu.kprobes.events;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;

import dev.kpemu.image.btf.ModuleLayout;
import dev.kpemu.kprobes.ArchKernelText;
import dev.kpemu.kprobes.SymbolResolver;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;

/**
 * The modules the guest kernel has loaded, with their symbols as the kernel's module kallsyms
 * gives them ({@code kernel/module/kallsyms.c}). A module is read from guest memory when it comes
 * ({@code do_init_module(mod)}: its symbols are relocated and its {@code kallsyms} points at the
 * full table) and forgotten when it goes. The vmlinux symbol views are wrapped so that names
 * ({@code MOD:SYM} and plain names after vmlinux's) and addresses inside modules resolve as the
 * kernel resolves them, with {@code [module]} in printed symbols.
 */
public final class LoadedModules {
    /** One loaded module: its name, its symbols sorted by address, and where its memory lies. */
    public record Module(String name, List<ModuleSymbol> symbols, List<ModuleSymbol> byValue, long[] textStart, long[] textEnd,
                         long[] start, long[] end, java.util.NavigableSet<Long> ftraceSites) {
        boolean contains(long a) {
            for (int i = 0; i < start.length; i++) if (start[i] != 0 && Long.compareUnsigned(a - start[i], end[i] - start[i]) < 0) return true;
            return false;
        }

        /** {@code within_module_init}: 6.1 has two regions (core, init); 6.4+ seven, the last three init. */
        boolean withinInit(long a) {
            int first = start.length == 2 ? 1 : 4;
            for (int i = first; i < start.length; i++) {
                if (start[i] != 0 && Long.compareUnsigned(a - start[i], end[i] - start[i]) < 0) return true;
            }
            return false;
        }

        /** {@code find_kallsyms_symbol}: the closest preceding named symbol; its size runs to the next one or the end of that text. */
        Optional<KernelSymbols.Symbol> symbolAt(long a) {
            // byValue is sorted by address (stably: table order among equal addresses), so the
            // kernel's linear scan is a binary search: the last symbol at or below a, the first above
            int lo = 0, hi = byValue.size();
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if (Long.compareUnsigned(byValue.get(mid).value(), a) <= 0) lo = mid + 1;
                else hi = mid;
            }
            if (lo == 0) return Optional.empty();
            int best = lo - 1;
            while (best > 0 && byValue.get(best - 1).value() == byValue.get(best).value()) best--;   // the first of equals wins
            long nextval = withinInit(a) ? textEnd[1] : textEnd[0];
            if (lo < byValue.size() && Long.compareUnsigned(byValue.get(lo).value(), nextval) < 0) nextval = byValue.get(lo).value();
            ModuleSymbol s = byValue.get(best);
            return Optional.of(new KernelSymbols.Symbol(s.name(), s.value(), nextval - s.value(), name));
        }

        OptionalLong address(String symbol) {
            for (ModuleSymbol s : symbols) if (s.name().equals(symbol)) return OptionalLong.of(s.value());
            return OptionalLong.empty();
        }
    }

    /** A defined, named module symbol ({@code st_shndx != SHN_UNDEF}, not a mapping symbol). */
    public record ModuleSymbol(String name, long value, boolean text) {}

    private static final int ELF64_SYM_SIZE = 24, STT_FUNC = 2, SHN_UNDEF = 0;

    private final ModuleLayout layout;
    private final Arch arch;
    private final Map<String, Module> modules = new LinkedHashMap<>();

    public LoadedModules(ModuleLayout layout, Arch arch) {
        this.layout = layout;
        this.arch = arch;
    }

    /** The loaded modules, in load order. */
    public List<Module> modules() { return List.copyOf(modules.values()); }

    /** The name of the module at {@code mod} ({@code struct module *}). */
    public String nameOf(Machine m, long mod) {
        byte[] raw = m.readVirtual(mod + layout.name(), layout.nameLength());
        int n = 0;
        while (n < raw.length && raw[n] != 0) n++;
        return new String(raw, 0, n, StandardCharsets.UTF_8);
    }

    /** Reads the module at {@code mod} ({@code struct module *}) from guest memory and adds it; returns its name. */
    public String load(Machine m, long mod) {
        String name = nameOf(m, mod);
        long ks = m.readVirtualLong(mod + layout.kallsyms());
        long symtab = m.readVirtualLong(ks + layout.symtab());
        long num = m.readVirtualLong(ks + layout.numSymtab()) & 0xffff_ffffL;
        long strtab = m.readVirtualLong(ks + layout.strtab());
        long[] tb = new long[layout.textBase().length], te = new long[tb.length];
        for (int i = 0; i < tb.length; i++) {
            tb[i] = m.readVirtualLong(mod + layout.textBase()[i]);
            te[i] = tb[i] + (m.readVirtualLong(mod + layout.textSize()[i]) & 0xffff_ffffL);
        }
        long[] sb = new long[layout.extentBase().length], se = new long[sb.length];
        for (int i = 0; i < sb.length; i++) {
            sb[i] = m.readVirtualLong(mod + layout.extentBase()[i]);
            se[i] = sb[i] + (m.readVirtualLong(mod + layout.extentSize()[i]) & 0xffff_ffffL);
        }
        List<ModuleSymbol> syms = new ArrayList<>();
        ByteBuffer table = ByteBuffer.wrap(m.readVirtual(symtab, (int) (num * ELF64_SYM_SIZE))).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 1; i < num; i++) {        // ELF starts real symbols at 1
            int at = i * ELF64_SYM_SIZE;
            long nameOff = table.getInt(at) & 0xffff_ffffL;
            int info = table.get(at + 4) & 0xff;
            int shndx = table.getShort(at + 6) & 0xffff;
            long value = table.getLong(at + 8);
            if (shndx == SHN_UNDEF) continue;
            String s = cString(m, strtab + nameOff);
            if (s.isEmpty() || isMappingSymbol(s)) continue;
            syms.add(new ModuleSymbol(s, value, (info & 0xf) == STT_FUNC));
        }
        List<ModuleSymbol> byValue = new ArrayList<>(syms);
        byValue.sort((x, y) -> Long.compareUnsigned(x.value(), y.value()));
        modules.put(name, new Module(name, List.copyOf(syms), List.copyOf(byValue), tb, te, sb, se, ftraceSites(m, syms)));
        return name;
    }

    /**
     * The module's ftrace call sites ({@code rec->ip}), found by their code
     * ({@link ArchKernelText#ftraceSite}): x86 the 5-byte NOP ftrace left at a function's entry
     * when it initialised the module, or the call it stands for (after an IBT landing pad, sealed
     * or not); arm64 the second instruction of the {@code -fpatchable-function-entry=2} pair (after
     * an optional landing pad).
     */
    private java.util.NavigableSet<Long> ftraceSites(Machine m, List<ModuleSymbol> syms) {
        java.util.TreeSet<Long> out = new java.util.TreeSet<>(Long::compareUnsigned);
        ArchKernelText entry = ArchKernelText.of(arch);
        for (ModuleSymbol s : syms) {
            if (!s.text()) continue;
            byte[] b;
            try {
                b = m.readVirtual(s.value(), entry.entryBytes());
            } catch (RuntimeException e) {
                continue;   // not mapped (init text already gone)
            }
            int site = entry.ftraceSite(b);
            if (site >= 0) out.add(s.value() + site);
        }
        return out;
    }

    /** {@code ftrace_location}: a loaded module's ftrace call site. */
    public boolean isFtraceSite(long a) {
        for (Module mod : modules.values()) if (mod.ftraceSites().contains(a)) return true;
        return false;
    }

    /** Forgets a module ({@code MODULE_STATE_GOING}). */
    public void unload(String name) { modules.remove(name); }

    private static String cString(Machine m, long va) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 512; i++) {
            byte b = m.readVirtual(va + i, 1)[0];
            if (b == 0) break;
            sb.append((char) (b & 0xff));
        }
        return sb.toString();
    }

    /** {@code is_mapping_symbol}: ARM mapping symbols ({@code $x}, {@code $d}, …) and local labels. */
    static boolean isMappingSymbol(String s) {
        if (s.startsWith(".L") || s.startsWith("L0")) return true;
        return s.length() >= 2 && s.charAt(0) == '$' && "axtd".indexOf(s.charAt(1)) >= 0 && (s.length() == 2 || s.charAt(2) == '.');
    }

    /** {@code is_module_text_address}: in the core or init text of a loaded module. */
    public boolean inText(long a) {
        for (Module mod : modules.values()) {
            for (int i = 0; i < mod.textStart().length; i++) {
                if (mod.textStart()[i] != 0 && Long.compareUnsigned(a - mod.textStart()[i], mod.textEnd()[i] - mod.textStart()[i]) < 0) return true;
            }
        }
        return false;
    }

    private Optional<Module> moduleAt(long a) {
        for (Module mod : modules.values()) if (mod.contains(a)) return Optional.of(mod);
        return Optional.empty();
    }

    private OptionalLong moduleSymbolAddress(String name) {
        int colon = name.indexOf(':');
        if (colon >= 0) {
            Module mod = modules.get(name.substring(0, colon));
            return mod == null ? OptionalLong.empty() : mod.address(name.substring(colon + 1));
        }
        for (Module mod : modules.values()) {
            OptionalLong a = mod.address(name);
            if (a.isPresent()) return a;
        }
        return OptionalLong.empty();
    }

    /** A plain name in vmlinux first, then in the modules; {@code MOD:SYM} in that module only. */
    private OptionalLong addressOf(String name, java.util.function.Function<String, OptionalLong> vmlinux) {
        OptionalLong a = name.indexOf(':') < 0 ? vmlinux.apply(name) : OptionalLong.empty();
        return a.isPresent() ? a : moduleSymbolAddress(name);
    }

    private Optional<KernelSymbols.Symbol> moduleSymbolAt(long address) {
        return moduleAt(address).flatMap(mod -> mod.symbolAt(address));
    }

    /** The kernel's symbol view with the loaded modules' symbols after vmlinux's. */
    public KernelSymbols symbols(KernelSymbols vmlinux) {
        return new KernelSymbols() {
            @Override public int countSymbols(String name) {
                int colon = name.indexOf(':');
                if (colon >= 0) {
                    Module mod = modules.get(name.substring(0, colon));
                    if (mod == null) return 0;
                    String s = name.substring(colon + 1);
                    return (int) mod.symbols().stream().filter(x -> x.name().equals(s)).count();
                }
                int n = vmlinux.countSymbols(name);
                for (Module mod : modules.values()) n += (int) mod.symbols().stream().filter(x -> x.name().equals(name)).count();
                return n;
            }

            @Override public FuncEntry funcEntry(String symbol, long offset) {
                if (symbol.indexOf(':') < 0) {
                    FuncEntry v = vmlinux.funcEntry(symbol, offset);
                    if (v != FuncEntry.NOT_FOUND) return v;
                }
                if (moduleSymbolAddress(symbol).isEmpty()) return symbol.indexOf(':') < 0 ? FuncEntry.NOT_FOUND : vmlinux.funcEntry(symbol, offset);
                return offset == 0 ? FuncEntry.ENTRY : FuncEntry.NOT_ENTRY;
            }

            @Override public Optional<FetchType> btfReturnType(String function) { return vmlinux.btfReturnType(function); }

            @Override public dev.kpemu.image.btf.Btf btf() { return vmlinux.btf(); }

            @Override public OptionalLong lookupName(String name) { return addressOf(name, vmlinux::lookupName); }

            @Override public OptionalLong lookupDataName(String name) { return addressOf(name, vmlinux::lookupDataName); }

            @Override public Optional<Symbol> symbolAt(long address) {
                return vmlinux.symbolAt(address).or(() -> moduleSymbolAt(address));
            }
        };
    }

    /** The engine's resolver with the loaded modules: {@code MOD:SYM} names and addresses in module text. */
    public SymbolResolver resolver(SymbolResolver vmlinux) {
        return new SymbolResolver() {
            @Override public OptionalLong address(String name) { return addressOf(name, vmlinux::address); }

            @Override public Optional<SymbolInfo> lookup(long address) {
                return vmlinux.lookup(address).or(() -> moduleSymbolAt(address)
                        .map(x -> new SymbolInfo(x.name(), x.start(), x.size(), true, x.module())));
            }
        };
    }
}
