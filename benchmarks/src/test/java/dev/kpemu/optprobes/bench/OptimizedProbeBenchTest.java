package dev.kpemu.optprobes.bench;

import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.kpemu.kprobes.bench.ProbeBench;
import dev.kpemu.machine.Arch;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The optimized figure is measured with the others (timing printed, not asserted: it depends on the host). */
class OptimizedProbeBenchTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void optimizedFigureMeasuredWithTheOthers(Arch arch) {
        ProbeBench.Result r = OptimizedProbeBench.run(arch, 20_000, 5);
        System.out.println(r.format());
        assertFalse(Double.isNaN(r.optimized()));
    }
}
