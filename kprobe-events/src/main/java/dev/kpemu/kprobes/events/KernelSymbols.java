package dev.kpemu.kprobes.events;

import java.util.Optional;
import java.util.OptionalLong;

/**
 * What the probe front end needs to know about the guest kernel's symbols (kallsyms):
 * checks the kernel makes while parsing a probe place, {@code @SYM} resolution at
 * registration, and {@code %pS}-style printing. The engine implements it over the kallsyms
 * tables it decoded; {@link #permissive()} serves syntax checking without a kernel.
 */
public interface KernelSymbols {
    /** A symbol covering an address: {@code name+offset/size [module]}. */
    record Symbol(String name, long start, long size, String module) {
        /** {@code sprint_symbol}: {@code name+0xoff/0xsize} and {@code  [module]} when in a module. */
        public String format(long address) {
            String s = name + "+0x" + Long.toHexString(address - start) + "/0x" + Long.toHexString(size);
            return module == null ? s : s + " [" + module + "]";
        }
    }

    /** Result of {@code kprobe_on_func_entry(NULL, symbol, offset)}. */
    enum FuncEntry {
        /** The address is a function entry (offset 0, or the arch's entry adjustment). */
        ENTRY,
        /** The symbol exists but the address is not its entry (-EINVAL). */
        NOT_ENTRY,
        /** The symbol is unknown (-ENOENT: the kernel defers the error). */
        NOT_FOUND
    }

    /** {@code number_of_same_symbols(name)}: how many symbols (vmlinux and modules) carry this name. */
    int countSymbols(String name);

    /** {@code kprobe_on_func_entry} for {@code symbol} (may be {@code MOD:SYM}) at {@code offset}. */
    FuncEntry funcEntry(String symbol, long offset);

    /**
     * The fetch type Linux derives from {@code function}'s BTF return type for an untyped
     * {@code $retval} ({@code fetch_type_from_btf_type}), if the kernel's BTF describes it.
     */
    default java.util.Optional<FetchType> btfReturnType(String function) { return java.util.Optional.empty(); }

    /** The kernel's own BTF ({@code bpf_get_btf_vmlinux}), or null when it is not known: BTF arguments then find no entry. */
    default dev.kpemu.image.btf.Btf btf() { return null; }

    /**
     * Whether the kernel was built with fprobe events (CONFIG_FPROBE_EVENTS: {@code f} and
     * {@code t} in {@code dynamic_events}): trace_fprobe's command parser is in its symbols.
     */
    default boolean hasFprobeEvents() { return lookupName("trace_fprobe_create").isPresent(); }

    /** Whether the kernel defines tracepoint {@code name} ({@code find_tracepoint}: its {@code __tracepoint_NAME}). */
    default boolean hasTracepoint(String name) { return lookupName("__tracepoint_" + name).isPresent(); }

    /** {@code kallsyms_lookup_name}: the address of {@code name}, if known. */
    OptionalLong lookupName(String name);

    /**
     * A wprobe's symbol ({@code w@SYM}): {@link #lookupName}, then the data symbols a
     * {@link SystemMap} adds when one was given (Debian's arm64 kallsyms has no data symbols).
     */
    default OptionalLong lookupDataName(String name) { return lookupName(name); }

    /** {@code kallsyms_lookup}: the symbol containing {@code address}, if any. */
    Optional<Symbol> symbolAt(long address);

    /** {@code sprint_symbol}: {@code sym+0xoff/0xsize [mod]}, or {@code 0x<hex>} when unknown. */
    default String sprintSymbol(long address) {
        return symbolAt(address).map(s -> s.format(address)).orElse("0x" + Long.toHexString(address));
    }

    /**
     * A table that knows no addresses but accepts every name once (and fprobe events exist, on the
     * dialects that have them): every symbol exists and is
     * unique, only offset 0 is a function entry, {@code @SYM} resolves to nothing (so
     * compiling {@code @SYM} needs a real table), and printing falls back to hex.
     */
    static KernelSymbols permissive() {
        return new KernelSymbols() {
            @Override public int countSymbols(String name) { return 1; }
            @Override public boolean hasFprobeEvents() { return true; }
            @Override public FuncEntry funcEntry(String symbol, long offset) {
                return offset == 0 ? FuncEntry.ENTRY : FuncEntry.NOT_ENTRY;
            }
            @Override public OptionalLong lookupName(String name) { return OptionalLong.empty(); }
            @Override public Optional<Symbol> symbolAt(long address) { return Optional.empty(); }
        };
    }
}
