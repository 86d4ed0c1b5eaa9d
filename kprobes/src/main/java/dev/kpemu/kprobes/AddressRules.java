package dev.kpemu.kprobes;

/**
 * The kernel's own rules about where a kprobe may go, beyond the instruction itself:
 * {@code check_ftrace_location} and {@code check_kprobe_address_safe} (core kernel text, the
 * kprobe blacklist, jump-label and static-call sites, {@code BUG()} traps). The engine asks them
 * at every registration; {@link Kprobes#allowUnsafe} skips them (kpemu's extension).
 */
@FunctionalInterface
public interface AddressRules {
    /**
     * Checks a probe at {@code address} in {@code symbol}; throws {@link KprobeException} with the
     * kernel's errno, or returns flags the probe gets ({@link Kprobe#FLAG_FTRACE} on an ftrace site).
     */
    int check(long address, SymbolResolver.SymbolInfo symbol);

    /**
     * Whether {@code can_probe} refuses an instruction that raises an exception by design
     * ({@link ProbeDecoder#isExceptionInstruction}) as it refuses a bad boundary (EILSEQ): x86 from
     * Linux 6.4 ("INT and UD are special and should not be kprobed"); recorded, 6.1 answers an
     * {@code int3} with EINVAL, 6.12 and 7.2 with EILSEQ.
     */
    default boolean refusesExceptionInstructions() { return false; }

    /** No rule: bare-metal guests and tests. */
    static AddressRules none() { return (a, s) -> 0; }
}
