package dev.kpemu.optprobes;

import dev.kpemu.machine.Arch;

/**
 * The bytes the engine writes at the probe site, all of the same length and at {@code address}:
 * <ul>
 * <li>{@link #original()}: the original text (restored on unregister, byte for byte);</li>
 * <li>{@link #optimized()}: the jump to the detour — x86 {@code e9 rel32} (Linux
 *     {@code arch_optimize_kprobes}), arm64 {@code B imm26};</li>
 * <li>{@link #breakpoint()}: the unoptimized state — x86 the original bytes with the first replaced by
 *     {@code int3}, which is what Linux's {@code arch_unoptimize_kprobe} leaves (an armed breakpoint
 *     probe); arm64 {@code BRK #KPROBES_BRK_IMM}.</li>
 * </ul>
 * On x86 the three are 5 bytes (only the jump's bytes change; the rest of a longer displaced region
 * is never written). Write them only while no vCPU runs and no interrupted context has a pc in the
 * interior of the region ({@link DisplacedRegion#interior}), then drop the translation cache for
 * the range.
 *
 * @param arch       the architecture
 * @param address    the probe address
 * @param original   original bytes
 * @param optimized  jump bytes
 * @param breakpoint breakpoint-probe bytes
 */
public record SitePatch(Arch arch, long address, byte[] original, byte[] optimized, byte[] breakpoint) {

    public SitePatch {
        original = original.clone();
        optimized = optimized.clone();
        breakpoint = breakpoint.clone();
        if (original.length != optimized.length || original.length != breakpoint.length) {
            throw new IllegalArgumentException("patch lengths differ");
        }
    }

    @Override public byte[] original() { return original.clone(); }
    @Override public byte[] optimized() { return optimized.clone(); }
    @Override public byte[] breakpoint() { return breakpoint.clone(); }

    /** Number of bytes written. */
    public int length() {
        return original.length;
    }

    /** The patch that sends the probe site of {@code buffer}'s region to {@code buffer}. */
    public static SitePatch of(DetourBuffer buffer) {
        return ArchOptimizer.of(buffer.region().arch()).sitePatch(buffer);
    }

    /** {@code jmp rel32} at {@code from} to {@code to}; {@link Refusal.Reason#OUT_OF_RANGE} beyond ±2 GiB. */
    public static byte[] x86Jump(long from, long to) {
        return X86Detour.jmp(from, to);
    }

    /** {@code B} at {@code from} to {@code to}; {@link Refusal.Reason#OUT_OF_RANGE} beyond ±128 MiB. */
    public static byte[] arm64Branch(long from, long to) {
        return Arm64Detour.le(Arm64Detour.branch(from, to));
    }
}
