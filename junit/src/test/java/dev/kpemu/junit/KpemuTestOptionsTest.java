package dev.kpemu.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

import dev.kpemu.api.KpemuSession;
import dev.kpemu.machine.Schedule;

/** {@link KpemuTest#cpus()} and {@link KpemuTest#schedSeed()} reach the session the extension builds (nothing boots here). */
class KpemuTestOptionsTest {
    // on types, not methods: a method annotated @KpemuTest is a test that boots
    @KpemuTest(cpus = 4, schedSeed = 42)
    static final class FourCpus {}

    @KpemuTest
    static final class Defaults {}

    @Test
    void theAnnotationsCpusAndSeedBuildTheSession() {
        KpemuSession s = Sessions.build(FourCpus.class.getAnnotation(KpemuTest.class));
        assertEquals(4, s.cpus());
        assertEquals(42, s.schedSeed());
        KpemuSession d = Sessions.build(Defaults.class.getAnnotation(KpemuTest.class));
        assertEquals(1, d.cpus());
        assertEquals(Schedule.DEFAULT_SEED, d.schedSeed());
    }
}
