package dev.kpemu.optprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.List;

import org.junit.jupiter.api.Test;

/** A probe refused for good keeps only its permanent reasons (issue 11: --list showed "the probe is disabled" for enabled probes). */
class VerdictTest {
    @Test
    void permanentPartDropsTheStateOfTheMoment() {
        Refusal disabled = new Refusal(Refusal.Reason.DISABLED, 0x1000, "the probe is disabled");
        Refusal reserved = new Refusal(Refusal.Reason.RESERVED_TEXT, 0x1002, "displaced region overlaps self-patched text");
        Verdict.Refused both = new Verdict.Refused(List.of(disabled, reserved), null);
        assertEquals(List.of(reserved), both.permanentPart().refusals());
        Verdict.Refused onlyTemporary = new Verdict.Refused(List.of(disabled), null);
        assertSame(onlyTemporary, onlyTemporary.permanentPart());
    }
}
