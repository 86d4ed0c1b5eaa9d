package dev.kpemu.kprobes;

import dev.kpemu.machine.Arch;

/**
 * The arch's forms of kernel text that the kernel patches itself, written once for the engine,
 * the optimizer and the event layer: a function's entry (the landing pad a probe on the function
 * skips, the function's ftrace call site) and a jump-label site's jump.
 */
public interface ArchKernelText {

    /** The rules of {@code arch}. */
    static ArchKernelText of(Arch arch) { return ArchBackEnds.kernelText(arch); }

    /** Bytes of a function's start {@link #probeSkip} and {@link #ftraceSite} look at. */
    int entryBytes();

    /**
     * Bytes at the start of {@code code} (a function's first bytes) that a probe on the function
     * goes past ({@code arch_adjust_kprobe_addr}): x86 IBT's landing pad, 4; arm64 0 (Linux's
     * arm64 kprobes do not skip {@code bti c}).
     */
    int probeSkip(byte[] code);

    /**
     * The offset in {@code code} (a function's first {@link #entryBytes} bytes) of its ftrace call
     * site, the address {@code ftrace_location} names, or -1: x86 a 5-byte {@code call} or NOP after
     * the optional IBT landing pad; arm64 the second instruction of the
     * {@code -fpatchable-function-entry=2} pair ({@code nop}/{@code mov x9, x30}, then
     * {@code nop}/{@code bl}) after an optional {@code bti c}, {@code paciasp} or {@code pacibsp}.
     */
    int ftraceSite(byte[] code);

    /** Bytes {@link #jumpOver} reads at a jump-label site (x86 5, arm64 4). */
    int jumpLabelSiteBytes();

    /**
     * {@code arch_jump_label_transform} to enabled: the jump from the jump-label site at
     * {@code code}, whose bytes are {@code site}, to {@code target}, in the size of the no-op it
     * replaces, or null when the site holds no no-op (x86 {@code jmp rel8} over a 2-byte NOP,
     * {@code jmp rel32} over the 5-byte NOP; arm64 {@code b} over {@code nop}).
     */
    byte[] jumpOver(byte[] site, long code, long target);
}
