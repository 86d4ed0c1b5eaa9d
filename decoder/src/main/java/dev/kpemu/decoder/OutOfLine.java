package dev.kpemu.decoder;

/**
 * What a probe engine must do to run a probed instruction somewhere other than its own address,
 * following Linux's kprobes decisions ({@code arch/x86/kernel/kprobes/core.c},
 * {@code arch/arm64/kernel/probes/decode-insn.c}).
 */
public enum OutOfLine {
    /** The bytes can be copied to a slot and executed there unchanged. */
    COPY,
    /** The bytes can be executed from a slot after patching a PC-relative displacement (x86 RIP-relative). */
    COPY_WITH_FIXUP,
    /**
     * The instruction must be emulated at its original address (PC-relative branches, calls and
     * returns, arm64 ADR/ADRP/LDR literal, x86 {@code pushf}/{@code popf}/{@code cli}/{@code sti}).
     */
    SIMULATE,
    /** Linux refuses to probe it (traps, {@code iret}, far branches, exclusive load/store, MSR…). */
    REJECT
}
