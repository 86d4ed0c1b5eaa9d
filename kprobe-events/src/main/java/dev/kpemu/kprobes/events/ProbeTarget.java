package dev.kpemu.kprobes.events;

/** Where a probe is placed. */
public sealed interface ProbeTarget {
    /** {@code [MOD:]SYM[+offs]}; {@code module} is null for vmlinux symbols. */
    record SymbolTarget(String module, String symbol, long offset) implements ProbeTarget {
        /** The symbol as the kernel stores it ({@code MOD:SYM} or {@code SYM}). */
        public String qualifiedName() { return module == null ? symbol : module + ":" + symbol; }
    }
    /** {@code MEMADDR}: an absolute address. */
    record AddressTarget(long address) implements ProbeTarget {}
    /** {@code PATH:OFFSET}: a uprobe's place, an offset in a file (not a kernel address). */
    record FileTarget(String path, long offset) implements ProbeTarget {}
}
