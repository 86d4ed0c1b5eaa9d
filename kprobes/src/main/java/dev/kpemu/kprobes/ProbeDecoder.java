package dev.kpemu.kprobes;

import dev.kpemu.machine.Arch;

/**
 * The arch's registration-time decisions about a probe point, made on text alone (no machine):
 * where an entry probe goes ({@code arch_adjust_kprobe_addr}) and whether and how the instruction
 * there can be probed ({@code arch_prepare_kprobe}'s checks and decoding). The engine asks it on a
 * running guest's text; {@code check-events} asks it on the kernel file's text before boot.
 */
public interface ProbeDecoder extends AutoCloseable {
    /** Where a probe {@code offset} bytes into a function goes, and whether that is the function's entry. */
    record ProbeAddress(long address, boolean onFunctionEntry) {}

    /** Reads original text (with any breakpoint undone). */
    @FunctionalInterface
    interface TextReader { byte[] read(long va, int len); }

    Arch arch();

    /**
     * {@code arch_adjust_kprobe_addr}: the probe address for {@code offset} bytes into the function
     * starting at {@code functionStart}. By default the entry is offset 0; an arch whose functions
     * may begin with a landing pad (x86 IBT's {@code endbr64}) moves entry probes past it.
     */
    default ProbeAddress adjustAddress(long functionStart, long offset, TextReader text) {
        return new ProbeAddress(functionStart + offset, offset == 0);
    }

    /**
     * {@code arch_prepare_kprobe}: checks and decodes the instruction at {@code address} inside
     * {@code symbol}. Throws {@link KprobeException} with the kernel's errno.
     */
    ArchInsn prepare(long address, TextReader text, SymbolResolver.SymbolInfo symbol);

    /**
     * Whether the instruction at {@code address} raises an exception by design (x86: INT3, INT n,
     * INTO, INT1, UD0, UD1, UD2) — {@code is_exception_insn}, which {@code can_probe} refuses from
     * Linux 6.4 ({@link AddressRules#refusesExceptionInstructions}). False on arches without it.
     */
    default boolean isExceptionInstruction(long address, TextReader text) { return false; }

    /** Releases the disassembler. */
    @Override
    void close();

    static ProbeDecoder open(Arch arch) {
        return ArchBackEnds.decoder(arch);
    }
}
