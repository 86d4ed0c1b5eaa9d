package dev.kpemu.optprobes.bench;

import dev.kpemu.kprobes.bench.ProbeBench;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.JumpOptimizer;

/**
 * {@code kpemu bench probes} with jump optimization: {@link ProbeBench}'s stepped, boosted and
 * return probes plus the same kprobe jump-optimized, all measured in one run against the same
 * unprobed loop. The optimized probe is on the function's first instruction, as the others; the
 * detour hands off to the host by a block hook on its first instruction (live registers, no frame).
 */
public final class OptimizedProbeBench {
    private OptimizedProbeBench() {}

    public static ProbeBench.Result run(Arch arch) {
        return run(arch, 100_000, 9);
    }

    public static ProbeBench.Result run(Arch arch, int calls, int batches) {
        return ProbeBench.run(arch, calls, batches, k -> {
            JumpOptimizer o = JumpOptimizer.attach(k);
            if (o.flush() != 0) throw new IllegalStateException("optimization still pending");
            o.verdicts().forEach((a, v) -> {
                if (!k.isOptimized(a)) throw new IllegalStateException("the bench probe was not optimized: " + v);
            });
        });
    }

    public static void main(String[] args) {
        for (Arch a : Arch.values()) System.out.println(run(a).format());
    }
}
