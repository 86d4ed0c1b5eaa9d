package dev.kpemu.optprobes;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;

/**
 * The arch half of jump optimization, as Linux splits {@code kernel/kprobes.c} from
 * {@code arch/x86/kernel/kprobes/opt.c} (arm64 has no optprobes in Linux: kpemu's extension):
 * which probes may be optimized, the detour's code, the site's jump, and how far a detour may be
 * from the probe. The generic parts ({@link OptimizationSafety#check}, {@link DetourBuffer#build},
 * {@link SitePatch#of}, {@link JumpOptimizer}) choose one by the arch and never branch on it.
 */
public interface ArchOptimizer {
    /** The back end of {@code arch}. */
    static ArchOptimizer of(Arch arch) {
        return switch (arch) {
            case X86_64 -> X86Optimizer.INSTANCE;
            case ARM64 -> Arm64Optimizer.INSTANCE;
        };
    }

    Arch arch();

    /** The arch's rules for {@code candidate} ({@code can_optimize} on x86; kpemu's one-instruction rules on arm64). */
    Verdict check(Decoder decoder, Candidate candidate);

    /** The detour's bytes for {@code region} at {@code address}. */
    DetourBuffer detour(DisplacedRegion region, long address, DetourBuffer.Style style);

    /** An upper bound of a detour's size (for sizing buffer slots). */
    int maxDetourSize();

    /** The probe site's bytes: original, jump to {@code buffer}, breakpoint. */
    SitePatch sitePatch(DetourBuffer buffer);

    /** True when the vCPU runs user code (x86 CPL 3, arm64 EL0): the current task has no interrupted kernel context. */
    boolean inUserMode(Machine machine);

    /** {@link #inUserMode(Machine)} of a vCPU that is not running: from its engine's registers. */
    boolean inUserMode(dev.kpemu.unicorn.Unicorn engine);

    /** The pc of a vCPU that is not running, from its engine ({@link Machine#engine(int)}). */
    long pc(dev.kpemu.unicorn.Unicorn engine);

    /** The kernel's tables this arch's optimizer needs, read from the kernel file ({@link KernelOptimizationInputs#read}). */
    KernelOptimizationInputs kernelInputs(SymbolTable syms, dev.kpemu.image.OnDemandFileBytes file);

    /** How far from the probe a detour may be for the site's jump to reach it (x86 rel32: ±2 GiB; arm64 {@code B}: ±128 MiB), with a margin. */
    long detourReach();
}
