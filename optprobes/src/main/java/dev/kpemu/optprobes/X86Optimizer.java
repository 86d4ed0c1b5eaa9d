package dev.kpemu.optprobes;

import java.util.Arrays;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.machine.Arch;

/** x86-64 jump optimization: Linux's {@code arch/x86/kernel/kprobes/opt.c} ({@link OptimizationSafety}'s x86 rules, {@link X86Detour}). */
final class X86Optimizer implements ArchOptimizer {
    static final X86Optimizer INSTANCE = new X86Optimizer();

    private X86Optimizer() {}

    @Override public Arch arch() { return Arch.X86_64; }

    @Override public Verdict check(Decoder decoder, Candidate candidate) { return OptimizationSafety.x86(decoder, candidate); }

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

    /** rel32's reach, less a margin. */
    @Override public long detourReach() { return 0x7fff_0000L; }
}
