package dev.kpemu.optprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.decoder.OutOfLine;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.Refusal.Reason;
import dev.kpemu.testing.Asm;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The arm64 rules kpemu defines (see {@link OptimizationSafety}). */
class Arm64SafetyTest {
    static final long F = 0x401000L;

    Decoder decoder;

    @BeforeEach
    void open() {
        decoder = Decoder.open(Arch.ARM64);
    }

    @AfterEach
    void close() {
        decoder.close();
    }

    static byte[] fn(String src) {
        return Asm.arm64(src, F);
    }

    Verdict check(Candidate.Builder b) {
        return OptimizationSafety.check(decoder, b.build());
    }

    Verdict check(byte[] code, long probe) {
        return check(Candidate.builder(F, code, probe));
    }

    static Verdict.Refused refused(Verdict v) {
        return assertInstanceOf(Verdict.Refused.class, v, () -> "expected a refusal, got " + v);
    }

    static DisplacedRegion accepted(Verdict v) {
        return assertInstanceOf(Verdict.Optimizable.class, v, () -> "expected optimizable, got " + v).region();
    }

    /** Debian-style prologue with pointer authentication (Keystone spells paciasp/autiasp/bti as hints). */
    static final String PROLOGUE = """
            hint #25
            stp x29, x30, [sp, #-32]!
            mov x29, sp
            str x19, [sp, #16]
            mov x19, x0
            ldr x0, [x19, #8]
            ldr x19, [sp, #16]
            ldp x29, x30, [sp], #32
            hint #29
            ret
            """;

    @Test
    void typicalPrologueIsAcceptedWithAOneInstructionRegion() {
        byte[] code = fn(PROLOGUE);
        for (long probe = F; probe < F + 8 * 4; probe += 4) {
            DisplacedRegion r = accepted(check(code, probe));
            assertEquals(4, r.length());
            assertEquals(1, r.instructions().size());
        }
    }

    @Test
    void landingPadsRefuseOnlyWhenBtiIsEnforced() {
        byte[] code = fn("hint #34\n" + PROLOGUE);
        accepted(check(code, F));
        assertEquals(Reason.LANDING_PAD, refused(check(Candidate.builder(F, code, F).landingPadsEnforced(true))).reason());
        assertEquals(Reason.LANDING_PAD,
                refused(check(Candidate.builder(F, code, F + 4).landingPadsEnforced(true))).reason()); // paciasp
        accepted(check(Candidate.builder(F, code, F + 8).landingPadsEnforced(true))); // stp
    }

    @Test
    void rejectedInstructionsRefuse() {
        byte[] code = fn("msr daifset, #2\n svc #0\n ldxr x1, [x0]\n wfi\n ret\n");
        for (long probe = F; probe < F + 16; probe += 4) {
            assertEquals(Reason.NOT_RELOCATABLE, refused(check(code, probe)).reason(), "at " + Long.toHexString(probe));
        }
    }

    @Test
    void simulatedInstructionsAreAccepted() {
        byte[] code = fn("cbz x0, out\n b.eq out\n bl out\n ldr x1, lit\n out: ret\n lit: .quad 7\n");
        for (long probe = F; probe < F + 20; probe += 4) {
            DisplacedRegion r = accepted(check(code, probe));
            assertEquals(OutOfLine.SIMULATE, r.instructions().getFirst().outOfLine());
        }
    }

    @Test
    void probeInsideAnExclusiveSequenceRefuses() {
        byte[] code = fn("""
                retry:
                ldxr x1, [x0]
                add x1, x1, #1
                stxr w2, x1, [x0]
                cbnz w2, retry
                ret
                """);
        Verdict.Refused v = refused(check(code, F + 4));
        assertEquals(Reason.ATOMIC_SEQUENCE, v.reason());
        assertEquals(F, v.refusals().getFirst().address());
        assertTrue(refused(check(code, F + 8)).has(Reason.ATOMIC_SEQUENCE)); // the stxr itself (also not steppable)
        accepted(check(code, F + 12)); // after the store-exclusive
    }

    @Test
    void exceptionTableEntryRefusesOnlyAtTheProbedInstruction() {
        byte[] code = fn(PROLOGUE);
        long load = F + 20;
        assertEquals(Reason.EXCEPTION_TABLE_ENTRY,
                refused(check(Candidate.builder(F, code, load).exceptionTable(List.of(load)))).reason());
        // elsewhere in the function: a fixup can only land on an instruction start, never inside a B
        accepted(check(Candidate.builder(F, code, F + 4).exceptionTable(List.of(load))));
    }

    @Test
    void jumpsIntoTheFunctionAndIndirectJumpsDoNotMatter() {
        // a branch to the probed instruction lands on the B: the same as entering at the probe
        byte[] code = fn("""
                stp x29, x30, [sp, #-16]!
                target: mov x29, sp
                cbz x0, target
                br x1
                """);
        accepted(check(code, F + 4));
    }

    @Test
    void structuralRules() {
        byte[] code = fn(PROLOGUE);
        assertEquals(Reason.NOT_ON_INSTRUCTION_BOUNDARY, refused(check(code, F + 2)).reason());
        assertEquals(Reason.NOT_IN_FUNCTION, refused(check(code, F + code.length)).reason());
        assertEquals(Reason.FTRACE_SITE,
                refused(check(Candidate.builder(F, fn("nop\n nop\n" + PROLOGUE), F + 4).ftraceSites(List.of(F + 4)))).reason());
        assertEquals(Reason.RESERVED_TEXT,
                refused(check(Candidate.builder(F, code, F + 8).reservedText(TextRange.of(F + 8, 4)))).reason());
    }

    @Test
    void temporaryBlockers() {
        byte[] code = fn(PROLOGUE);
        Verdict.Refused v = refused(check(Candidate.builder(F, code, F + 4).postHandler(true).enabled(false)
                .optimizationOn(false).otherProbe(F + 8).otherProbe(F)));
        assertEquals(List.of(Reason.POST_HANDLER, Reason.DISABLED, Reason.OPTIMIZATION_OFF),
                v.refusals().stream().map(Refusal::reason).toList());
        assertTrue(v.onlyTemporary());
    }
}
