package dev.kpemu.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;

import org.junit.jupiter.api.Test;

import dev.kpemu.cli.ExitCodes;

/** What the builder refuses before anything boots, and the outcomes' exit codes (the CLI's table). */
class BuilderTest {
    @Test
    void outcomesExitAsTheCliDoes() {
        assertEquals(ExitCodes.OK, Outcome.POWERED_OFF.exitCode());
        assertEquals(ExitCodes.GUEST_PANIC, Outcome.GUEST_FAILED.exitCode());
        assertEquals(ExitCodes.TIMEOUT, Outcome.TIMEOUT.exitCode());
        assertEquals(ExitCodes.ERROR, Outcome.STOPPED.exitCode());
        assertEquals(ExitCodes.USAGE, Outcome.REJECTED.exitCode());
    }

    @Test
    void badChoicesAreRefusedWithOneLine() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> KpemuSession.builder().kernel("debian:nosuchsuite"));
        assertEquals(1, e.getMessage().lines().count(), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> KpemuSession.builder().memoryMiB(32));
        assertThrows(IllegalArgumentException.class, () -> KpemuSession.builder().timeout(Duration.ZERO));
        assertThrows(IllegalArgumentException.class, () -> KpemuSession.builder().command());
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
