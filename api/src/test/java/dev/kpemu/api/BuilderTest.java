package dev.kpemu.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;

import org.junit.jupiter.api.Test;

import dev.kpemu.boot.BootOutcome;

/** What the builder refuses before anything boots, and the session's outcome for each way a boot ends. */
class BuilderTest {
    @Test
    void eachBootEndingIsTheSessionOutcomeOfTheSameName() {
        for (BootOutcome b : BootOutcome.values()) assertEquals(b.name(), Outcome.of(b).name());
        assertEquals(BootOutcome.values().length + 1, Outcome.values().length, "REJECTED is the session's own");
    }

    @Test
    void badChoicesAreRefusedWithOneLine() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> KpemuSession.builder().kernel("debian:nosuchsuite"));
        assertEquals(1, e.getMessage().lines().count(), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> KpemuSession.builder().memoryMiB(32));
        assertThrows(IllegalArgumentException.class, () -> KpemuSession.builder().timeout(Duration.ZERO));
        assertThrows(IllegalArgumentException.class, () -> KpemuSession.builder().command());
        assertThrows(IllegalArgumentException.class, () -> KpemuSession.builder().cpus(0));
        assertThrows(IllegalArgumentException.class, () -> KpemuSession.builder().cpus(dev.kpemu.boot.BootRunner.Options.MAX_CPUS + 1));
    }

    @Test
    void cpusAndTheScheduleSeedReachTheBootOptions() {
        var o = KpemuSession.bootOptions(KpemuSession.builder().cpus(4).schedSeed(9), dev.kpemu.machine.Arch.ARM64, null, null, null, null);
        assertEquals(4, o.cpus());
        assertEquals(9, o.schedSeed());
        var d = KpemuSession.bootOptions(KpemuSession.builder(), dev.kpemu.machine.Arch.X86_64, null, null, null, null);
        assertEquals(1, d.cpus());
        assertEquals(dev.kpemu.machine.Schedule.DEFAULT_SEED, d.schedSeed());
    }

    @Test
    void aTypedRecordMayOnlyHoldWhatAnArgumentCanBe() {
        record Bad(java.util.List<String> names) {}
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Kprobe.typed("f", Bad.class, (ctx, a) -> { }));
        assertEquals("Bad.names: a typed argument is long, int, short, byte, boolean or String, not List", e.getMessage());
    }

    @Test
    void aSessionRunsOnce() {
        KpemuSession s = KpemuSession.builder().kernel("/nonexistent/kernel-for-kpemu")
                .initramfs(java.nio.file.Path.of("/nonexistent/initramfs-for-kpemu")).build();
        KpemuException e = assertThrows(KpemuException.class, s::run);
        assertEquals(1, e.getMessage().lines().count(), e.getMessage());
        assertThrows(IllegalStateException.class, s::run);
    }
}
