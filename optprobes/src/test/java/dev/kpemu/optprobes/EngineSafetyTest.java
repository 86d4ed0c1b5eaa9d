package dev.kpemu.optprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kpemu.kprobes.Kprobe;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.JumpOptimizer.State;
import dev.kpemu.optprobes.Refusal.Reason;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The safety rules enforced through the engine: a probe the rules refuse stays a breakpoint probe
 * (and still works), one they accept becomes optimized. x86 follows Linux; arm64 follows kpemu's
 * one-instruction rules (see {@link OptimizationSafety}): there the whole-function rules are vacuous,
 * so a function with an indirect jump, a branch to the probe or a call at the probe is accepted.
 */
class EngineSafetyTest {

    static final Map<String, String> X86 = Functions.of(Arch.X86_64,
            "prologue", Functions.X86_PROLOGUE,
            // an indirect jump anywhere in the function (a possible jump table into the region)
            "indirect_jump", """
                    push %rbp
                    mov %rsp, %rbp
                    lea 1f(%rip), %rax
                    jmp *%rax
                    1: mov %rdi, %rax
                    pop %rbp
                    ret
                    """,
            // jump_into(a, n) = a * n: the loop branches to probe + 2, inside the jump's displacement
            "jump_into", """
                    xor %eax, %eax
                    1: add %rdi, %rax
                    dec %rsi
                    jnz 1b
                    ret
                    """,
            // the displaced region from the entry (push; mov; call) holds a call
            "call_in_region", """
                    push %rbp
                    mov %rsp, %rbp
                    call prologue
                    pop %rbp
                    ret
                    """,
            // mov; inc; ret: a probe on the inc has 4 bytes to the end of the function
            "crosses_end", """
                    mov %rdi, %rax
                    inc %rax
                    ret
                    """,
            // ex_table(a, p) = a + *p: the load at +4 has an exception-table entry
            "ex_table", """
                    push %rbp
                    mov %rsp, %rbp
                    mov (%rsi), %rax
                    add %rdi, %rax
                    pop %rbp
                    ret
                    """);

    record Case(String function, int offset, Reason refused, long[] args, long expected) {}

    @Test
    void x86RulesThroughTheEngine() {
        try (EngineGuest g = new EngineGuest(Arch.X86_64, X86)) {
            g.machine.writeVirtualLong(g.data, 1000);
            long exTableLoad = g.sym("ex_table") + 4;
            OptimizationInputs inputs = new OptimizationInputs() {
                @Override public Set<Long> exceptionTable() { return Set.of(exTableLoad); }
            };
            List<Case> cases = List.of(
                    new Case("prologue", 0, null, new long[] {5}, 16),
                    new Case("indirect_jump", 0, Reason.INDIRECT_JUMP, new long[] {7}, 7),
                    new Case("jump_into", 0, Reason.JUMP_INTO_REGION, new long[] {6, 7}, 42),
                    new Case("call_in_region", 0, Reason.CALL_IN_REGION, new long[] {2}, 7),
                    new Case("crosses_end", 3, Reason.REGION_CROSSES_FUNCTION_END, new long[] {8}, 9),
                    new Case("ex_table", 0, Reason.EXCEPTION_TABLE_ENTRY, new long[] {1, g.data}, 1001));
            check(g, inputs, cases);
        }
    }

    static final Map<String, String> ARM64 = Functions.of(Arch.ARM64,
            "prologue", Functions.A64_PROLOGUE,
            "indirect_jump", """
                    adr x2, target
                    br x2
                    target:
                    mov x0, x0
                    ret
                    """,
            // a loop whose branch goes back to the probed instruction
            "branch_to_probe", """
                    mov x2, #0
                    loop:
                    add x2, x2, x0
                    subs x1, x1, #1
                    b.ne loop
                    mov x0, x2
                    ret
                    """,
            // the probe is on the call itself (BL is simulated from the detour)
            "call_at_probe", """
                    stp x29, x30, [sp, #-16]!
                    mov x29, sp
                    bl prologue
                    add x0, x0, #100
                    ldp x29, x30, [sp], #16
                    ret
                    """,
            // ex_table(a, p) = a + *p: the load at +8 has an exception-table entry
            "ex_table", """
                    stp x29, x30, [sp, #-16]!
                    mov x29, sp
                    ldr x2, [x1]
                    add x0, x0, x2
                    ldp x29, x30, [sp], #16
                    ret
                    """,
            "ftrace_site", """
                    nop
                    add x0, x0, #1
                    ret
                    """);

    @Test
    void arm64RulesThroughTheEngine() {
        try (EngineGuest g = new EngineGuest(Arch.ARM64, ARM64)) {
            g.machine.writeVirtualLong(g.data, 1000);
            long exTableLoad = g.sym("ex_table") + 8;
            long ftrace = g.sym("ftrace_site");
            OptimizationInputs inputs = new OptimizationInputs() {
                @Override public Set<Long> exceptionTable() { return Set.of(exTableLoad); }
                @Override public Set<Long> ftraceSites() { return Set.of(ftrace); }
            };
            List<Case> cases = List.of(
                    new Case("prologue", 0, null, new long[] {5}, 16),
                    new Case("indirect_jump", 0, null, new long[] {7}, 7),
                    new Case("indirect_jump", 4, null, new long[] {7}, 7),
                    new Case("branch_to_probe", 4, null, new long[] {6, 7}, 42),
                    new Case("call_at_probe", 8, null, new long[] {2}, 107),
                    new Case("ex_table", 0, null, new long[] {1, g.data}, 1001),       // entry elsewhere: accepted
                    new Case("ex_table", 8, Reason.EXCEPTION_TABLE_ENTRY, new long[] {2, g.data}, 1002),
                    new Case("ftrace_site", 0, Reason.FTRACE_SITE, new long[] {3}, 4));
            check(g, inputs, cases);
        }
    }

    /** Each case in a fresh engine: the verdict, the state after a flush, the list, the same hits and result before and after. */
    static void check(EngineGuest g, OptimizationInputs inputs, List<Case> cases) {
        for (Case c : cases) {
            try (Kprobes k = g.kprobes()) {
                JumpOptimizer o = JumpOptimizer.attach(k, inputs);
                long at = g.sym(c.function()) + c.offset();
                int[] hits = {0};
                k.register(Kprobe.at(at).pre((p, r) -> { hits[0]++; return 0; }));
                assertEquals(c.expected(), g.call(c.function(), c.args()), c.toString());
                int perCall = hits[0];
                assertTrue(perCall > 0, c.toString());
                o.flush();
                String what = c + " " + o.verdict(at);
                if (c.refused() == null) {
                    assertInstanceOf(Verdict.Optimizable.class, o.verdict(at), what);
                    assertEquals(State.OPTIMIZED, o.state(at), what);
                    assertTrue(k.list().contains("[OPTIMIZED]"), what);
                } else {
                    Verdict.Refused r = assertInstanceOf(Verdict.Refused.class, o.verdict(at), what);
                    assertTrue(r.has(c.refused()), what);
                    assertEquals(State.BREAKPOINT, o.state(at), what);
                    assertFalse(k.list().contains("[OPTIMIZED]"), what);
                }
                assertEquals(c.expected(), g.call(c.function(), c.args()), what);
                assertEquals(2 * perCall, hits[0], what);
            }
        }
    }
}
