package dev.kpemu.optprobes;

import java.util.Arrays;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.unicorn.X86Reg;

/** x86-64 jump optimization: Linux's {@code arch/x86/kernel/kprobes/opt.c} ({@link X86OptimizationRules}, {@link X86Detour}). */
final class X86Optimizer implements ArchOptimizer {
    static final X86Optimizer INSTANCE = new X86Optimizer();

    private X86Optimizer() {}

    @Override public Arch arch() { return Arch.X86_64; }

    @Override public Verdict check(Decoder decoder, Candidate candidate) { return X86OptimizationRules.check(decoder, candidate); }

    @Override public DetourBuffer detour(DisplacedRegion region, long address, DetourBuffer.Style style) {
        return X86Detour.build(region, address, style);
    }

    @Override public int maxDetourSize() { return X86Detour.MAX_SIZE; }

    /** The site: {@code JMP32_INSN_SIZE} bytes become {@code jmp rel32}; unoptimized, an {@code int3} over the first. */
    @Override public SitePatch sitePatch(DetourBuffer buffer) {
        DisplacedRegion region = buffer.region();
        byte[] original = Arrays.copyOf(region.originalBytes(), OptimizationSafety.JMP32_INSN_SIZE);
        byte[] bp = original.clone();
        bp[0] = (byte) 0xcc;
        return new SitePatch(Arch.X86_64, region.probeAddress(), original, X86Detour.jmp(region.probeAddress(), buffer.address()), bp);
    }

    /** CPL 3: the low bits of CS. */
    @Override public boolean inUserMode(Machine machine) { return inUserMode(machine.engine()); }

    @Override public boolean inUserMode(dev.kpemu.unicorn.Unicorn engine) { return (engine.regRead(X86Reg.CS) & 3) == 3; }

    @Override public long pc(dev.kpemu.unicorn.Unicorn engine) { return engine.regRead(X86Reg.RIP); }

    @Override public KernelOptimizationInputs kernelInputs(SymbolTable syms, dev.kpemu.image.OnDemandFileBytes file) { return X86KernelInputsReader.read(syms, file); }

    /** rel32's reach, less a margin. */
    @Override public long detourReach() { return 0x7fff_0000L; }
}
