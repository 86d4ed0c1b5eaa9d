package dev.kpemu.optprobes;

import java.util.Arrays;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.arm64.Arm64Machine;

/** arm64 jump optimization, kpemu's extension ({@link OptimizationSafety}'s arm64 rules, {@link Arm64Detour}). */
final class Arm64Optimizer implements ArchOptimizer {
    static final Arm64Optimizer INSTANCE = new Arm64Optimizer();

    private Arm64Optimizer() {}

    @Override public Arch arch() { return Arch.ARM64; }

    @Override public Verdict check(Decoder decoder, Candidate candidate) { return Arm64OptimizationRules.check(decoder, candidate); }

    @Override public DetourBuffer detour(DisplacedRegion region, long address, DetourBuffer.Style style) {
        return Arm64Detour.build(region, address, style);
    }

    @Override public int maxDetourSize() { return Arm64Detour.MAX_SIZE; }

    /** The site: one instruction becomes {@code B}; unoptimized, the kprobes {@code BRK}. */
    @Override public SitePatch sitePatch(DetourBuffer buffer) {
        DisplacedRegion region = buffer.region();
        return new SitePatch(Arch.ARM64, region.probeAddress(), Arrays.copyOf(region.originalBytes(), 4),
                Arm64Detour.le(Arm64Detour.branch(region.probeAddress(), buffer.address())), Arm64Detour.le(Arm64Detour.BRK_KPROBES));
    }

    @Override public boolean inUserMode(Machine machine) { return ((Arm64Machine) machine).currentEl() == 0; }

    /** PSTATE.EL (bits 3:2, SPSR layout) of a vCPU's engine. */
    @Override public boolean inUserMode(dev.kpemu.unicorn.Unicorn engine) { return ((engine.regRead(dev.kpemu.unicorn.Arm64Reg.PSTATE) >>> 2) & 3) == 0; }

    @Override public long pc(dev.kpemu.unicorn.Unicorn engine) { return engine.regRead(dev.kpemu.unicorn.Arm64Reg.PC); }

    @Override public KernelOptimizationInputs kernelInputs(SymbolTable syms, dev.kpemu.image.OnDemandFileBytes file) {
        return Arm64KernelInputsReader.read(syms, file.bytes());   // it reads every function's entry
    }

    /** {@code B}'s ±128 MiB, less a page. */
    @Override public long detourReach() { return (128L << 20) - 0x1000; }
}
