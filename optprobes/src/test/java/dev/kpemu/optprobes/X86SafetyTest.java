package dev.kpemu.optprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.Refusal.Reason;
import dev.kpemu.testing.Asm;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Each x86-64 safety rule on assembled functions (Linux's {@code can_optimize} and friends). */
class X86SafetyTest {
    static final long F = 0x401000L;

    Decoder decoder;

    @BeforeEach
    void open() {
        decoder = Decoder.open(Arch.X86_64);
    }

    @AfterEach
    void close() {
        decoder.close();
    }

    static byte[] fn(String body) {
        return Asm.x86(".intel_syntax noprefix\n" + body, F);
    }

    Verdict check(byte[] code, long probe) {
        return OptimizationSafety.check(decoder, Candidate.builder(F, code, probe).build());
    }

    Verdict check(Candidate.Builder b) {
        return OptimizationSafety.check(decoder, b.build());
    }

    static Verdict.Refused refused(Verdict v) {
        return assertInstanceOf(Verdict.Refused.class, v, () -> "expected a refusal, got " + v);
    }

    static DisplacedRegion accepted(Verdict v) {
        return assertInstanceOf(Verdict.Optimizable.class, v, () -> "expected optimizable, got " + v).region();
    }

    static final String PROLOGUE = """
            push rbp
            mov rbp, rsp
            push r12
            push rbx
            mov rbx, rdi
            mov rax, qword ptr [rdi + 8]
            add rax, rsi
            pop rbx
            pop r12
            pop rbp
            ret
            """;

    @Test
    void typicalPrologueIsAcceptedWithASixByteRegion() {
        DisplacedRegion r = accepted(check(fn(PROLOGUE), F));
        // push rbp (55) + mov rbp,rsp (48 89 e5) + push r12 (41 54) = 6 bytes, three instructions
        assertEquals(6, r.length());
        assertEquals(3, r.instructions().size());
        assertEquals(F + 6, r.end());
    }

    @Test
    void debianPrologueAfterTheFtraceNopIsAccepted() {
        // endbr64 (4) + nop5 (5, the boot-time form of call __fentry__) + push rbp ...
        byte[] code = fn("endbr64\n .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n" + PROLOGUE);
        DisplacedRegion r = accepted(check(code, F + 9));
        assertEquals(6, r.length());
        // the ftrace site itself is never optimized
        Verdict.Refused v = refused(check(code, F + 4));
        assertEquals(List.of(Reason.FTRACE_SITE), v.refusals().stream().map(Refusal::reason).toList());
        assertEquals(F + 4, v.refusals().getFirst().address());
    }

    @Test
    void callFentryAtEntryIsAnFtraceSiteAndACall() {
        byte[] code = fn("call fentry\n" + PROLOGUE + "fentry: ret\n");
        Verdict.Refused v = refused(check(code, F));
        assertTrue(v.has(Reason.CALL_IN_REGION), v::toString);
        assertTrue(v.has(Reason.FTRACE_SITE), v::toString);
        accepted(check(code, F + 5));
        // a listed site is honoured even without the entry heuristic
        assertTrue(refused(check(Candidate.builder(F, fn("push rbx\n nop\n nop\n nop\n nop\n nop\n pop rbx\n ret"), F)
                .detectEntryFtraceSite(false).ftraceSites(List.of(F + 2)))).has(Reason.FTRACE_SITE));
    }

    @Test
    void indirectJumpAnywhereInTheFunctionRefuses() {
        byte[] code = fn(PROLOGUE.replace("ret", "ret\n jmp rax\n"));
        Verdict.Refused v = refused(check(code, F));
        assertEquals(Reason.INDIRECT_JUMP, v.reason());
        assertFalse(v.onlyTemporary());
        // memory-indirect (jump table) form
        assertEquals(Reason.INDIRECT_JUMP,
                refused(check(fn(PROLOGUE.replace("ret", "ret\n jmp qword ptr [rax*8 + 0x402000]\n")), F)).reason());
        // 6.x skips the check on retpoline/IBT kernels
        accepted(check(Candidate.builder(F, code, F).indirectJumpCheck(false)));
    }

    @Test
    void retpolineJumpToTheThunksCountsAsIndirect() {
        byte[] code = fn(PROLOGUE.replace("ret", "ret\n jmp thunk\n .org 0x100\n thunk: ret\n"));
        long thunk = F + 0x100;
        // without the thunk range the jmp is a plain direct jump
        accepted(check(code, F));
        Verdict.Refused v = refused(check(Candidate.builder(F, code, F).indirectThunks(TextRange.of(thunk, 0x20))));
        assertEquals(Reason.INDIRECT_JUMP, v.reason());
    }

    @Test
    void jumpIntoTheProhibitionRegionRefuses() {
        // F: push rbp; F+1: mov rbp,rsp (target); F+4: push r12
        byte[] code = fn("""
                push rbp
                inner: mov rbp, rsp
                push r12
                test rdi, rdi
                jz inner
                pop r12
                pop rbp
                ret
                """);
        Verdict.Refused v = refused(check(code, F));
        assertEquals(Reason.JUMP_INTO_REGION, v.reason());
        // a jump to the first byte is allowed
        accepted(check(fn("""
                start: push rbp
                mov rbp, rsp
                push r12
                test rdi, rdi
                jz start
                pop r12
                pop rbp
                ret
                """), F));
    }

    @Test
    void jumpToProbePlusFiveRefusesEvenAtTheRegionEnd() {
        // region push rbp; mov rbp,rsp; push rbx = exactly 5 bytes; Linux's bound is inclusive
        byte[] code = fn("""
                push rbp
                mov rbp, rsp
                push rbx
                after: test rdi, rdi
                jnz after
                pop rbx
                pop rbp
                ret
                """);
        assertEquals(5, refused(check(code, F)).region().length());
        assertEquals(Reason.JUMP_INTO_REGION, refused(check(code, F)).reason());
        // one byte later the target is outside [paddr+1, paddr+5]
        accepted(check(fn("""
                push rbp
                mov rbp, rsp
                push r12
                after: test rdi, rdi
                jnz after
                pop r12
                pop rbp
                ret
                """), F));
    }

    @Test
    void callInTheRegionRefuses() {
        byte[] code = fn("mov eax, edi\n call helper\n ret\n helper: ret\n");
        assertEquals(Reason.CALL_IN_REGION, refused(check(code, F)).reason());
        byte[] indirect = fn("mov eax, edi\n call rax\n nop\n nop\n nop\n ret\n");
        assertEquals(Reason.CALL_IN_REGION, refused(check(indirect, F)).reason());
    }

    @Test
    void regionCrossingTheFunctionEndRefuses() {
        byte[] code = fn(PROLOGUE);
        // pop rbx; pop r12 (2); pop rbp; ret: 5 bytes from pop rbx... probe at pop r12: 4 bytes left
        long popR12 = F + code.length - 4;
        Verdict.Refused v = refused(check(code, popR12));
        assertEquals(Reason.REGION_CROSSES_FUNCTION_END, v.reason());
        assertNull(v.region());
        // five bytes before the end is fine
        accepted(check(code, F + code.length - 5));
    }

    @Test
    void exceptionTableEntryInTheFunctionRefuses() {
        byte[] code = fn(PROLOGUE);
        long load = F + 10; // mov rax, [rdi+8]: after 1+3+2+1+3 bytes
        Verdict.Refused v = refused(check(Candidate.builder(F, code, F).exceptionTable(List.of(load))));
        assertEquals(Reason.EXCEPTION_TABLE_ENTRY, v.reason());
        assertEquals(load, v.refusals().getFirst().address());
        // entries of other functions do not matter
        accepted(check(Candidate.builder(F, code, F).exceptionTable(List.of(F + 0x1000, F - 1))));
    }

    @Test
    void anotherProbeInTheRegionIsATemporaryRefusal() {
        byte[] code = fn(PROLOGUE);
        Verdict.Refused v = refused(check(Candidate.builder(F, code, F).otherProbe(F + 4)));
        assertEquals(Reason.PROBE_IN_REGION, v.reason());
        assertTrue(v.onlyTemporary());
        // at the region end (first byte after) or elsewhere: fine
        accepted(check(Candidate.builder(F, code, F).otherProbes(List.of(F + 6, F + 10))));
    }

    @Test
    void postHandlerDisabledAndSwitchAreTemporary() {
        byte[] code = fn(PROLOGUE);
        Verdict.Refused v = refused(check(Candidate.builder(F, code, F).postHandler(true).enabled(false)
                .optimizationOn(false)));
        assertEquals(List.of(Reason.POST_HANDLER, Reason.DISABLED, Reason.OPTIMIZATION_OFF),
                v.refusals().stream().map(Refusal::reason).toList());
        assertTrue(v.onlyTemporary());
        assertEquals(6, v.region().length());
    }

    @Test
    void unboostableOrUncopyableDisplacedInstructionsRefuse() {
        // jcc in the region
        assertEquals(Reason.NOT_BOOSTABLE, refused(check(fn("test edi, edi\n jz out\n nop\n nop\n out: ret\n"), F)).reason());
        // Grp2 shift (c1) is not boostable
        assertEquals(Reason.NOT_BOOSTABLE, refused(check(fn("shl eax, 3\n nop\n nop\n ret\n"), F)).reason());
        // int3 cannot be copied
        assertEquals(Reason.NOT_RELOCATABLE, refused(check(fn("int3\n nop\n nop\n nop\n nop\n ret\n"), F)).reason());
    }

    @Test
    void groupFormsAreBoostableOnKernelsFrom6_9() {
        // Linux 6.9's can_boost: group 2 (shifts), group 3 (test/not/neg/mul/div), inc/dec of groups 4 and 5
        for (String insn : List.of("shl eax, 3", "shr rdi, 0xc", "sar edx, cl", "test ecx, 1", "not rax", "neg ecx",
                "imul rdx", "inc rax", "dec dword ptr [rdi]", "inc byte ptr [rsi]")) {
            Candidate.Builder b = Candidate.builder(F, fn(insn + "\n nop\n nop\n nop\n nop\n nop\n ret\n"), F);
            assertEquals(Reason.NOT_BOOSTABLE, refused(check(b)).reason(), insn + " before 6.9");
            accepted(check(b.groupFormsBoostable(true)));
        }
        // still refused from 6.9: calls and far jumps of group 5, jcc, near jmp
        for (String insn : List.of("call qword ptr [rax]", "jmp 0x400")) {
            assertTrue(!(check(Candidate.builder(F, fn(insn + "\n nop\n nop\n nop\n nop\n ret\n"), F).groupFormsBoostable(true))
                    instanceof Verdict.Optimizable), insn);
        }
    }

    @Test
    void boostableSimulatedInstructionsAreDisplacedAsLinuxDoes() {
        // pushf and cli are emulated by a breakpoint probe but boostable: Linux copies them into the detour
        DisplacedRegion r = accepted(check(fn("pushfq\n cli\n mov eax, edi\n popfq\n ret\n"), F));
        assertEquals(4, r.instructions().size());
    }

    @Test
    void probeMustBeOnABoundaryInsideTheFunction() {
        byte[] code = fn(PROLOGUE);
        assertEquals(Reason.NOT_ON_INSTRUCTION_BOUNDARY, refused(check(code, F + 2)).reason());
        assertEquals(Reason.NOT_IN_FUNCTION, refused(check(code, F + code.length)).reason());
        assertEquals(Reason.NOT_IN_FUNCTION, refused(check(code, F - 1)).reason());
    }

    @Test
    void selfPatchedTextInTheRegionRefuses() {
        byte[] code = fn(PROLOGUE);
        assertEquals(Reason.RESERVED_TEXT,
                refused(check(Candidate.builder(F, code, F).reservedText(TextRange.of(F + 4, 5)))).reason());
        accepted(check(Candidate.builder(F, code, F).reservedText(TextRange.of(F + 6, 5))));
    }

    @Test
    void everyFailingRuleIsListed() {
        byte[] code = fn("mov eax, edi\n call helper\n jmp rax\n helper: ret\n");
        Verdict.Refused v = refused(check(Candidate.builder(F, code, F).postHandler(true)));
        assertEquals(List.of(Reason.INDIRECT_JUMP, Reason.CALL_IN_REGION, Reason.POST_HANDLER),
                v.refusals().stream().map(Refusal::reason).toList());
    }

    @Test
    void interiorOfTheRegionIsWhereAStoppedThreadForbidsPatching() {
        DisplacedRegion r = accepted(check(fn(PROLOGUE), F));
        // F: push rbp, F+1: mov rbp,rsp, F+4: push r12; end F+6
        assertFalse(r.interior(F), "at the first byte the jump simply runs");
        assertTrue(r.interior(F + 1));
        assertTrue(r.interior(F + 4));
        assertFalse(r.interior(F + 6), "the return point is outside");
        assertFalse(r.interior(F - 1));
    }
}
