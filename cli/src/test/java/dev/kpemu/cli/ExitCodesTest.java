package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

import dev.kpemu.boot.BootOutcome;

/** How a boot ended, as the exit codes docs/reference.md gives for it. */
class ExitCodesTest {
    @Test
    void eachBootEndingHasTheReadmesExitCode() {
        assertEquals(0, ExitCodes.of(BootOutcome.POWERED_OFF));
        assertEquals(3, ExitCodes.of(BootOutcome.GUEST_FAILED));
        assertEquals(4, ExitCodes.of(BootOutcome.TIMEOUT));
        assertEquals(1, ExitCodes.of(BootOutcome.STOPPED));
    }
}
