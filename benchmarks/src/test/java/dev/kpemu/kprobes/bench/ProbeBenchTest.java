package dev.kpemu.kprobes.bench;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;

/** The bench runs on both arches; every variant's handler ran once per call (checked inside the bench). Timing is not asserted: shared machines are noisy. */
class ProbeBenchTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void benchRunsOnBothArches(Arch arch) {
        ProbeBench.Result r = ProbeBench.run(arch, 20_000, 5);
        System.out.println(r.format());
        assertTrue(r.kprobe() > 0 && r.boosted() > 0 && r.kretprobe() > 0, r.format());
    }
}
