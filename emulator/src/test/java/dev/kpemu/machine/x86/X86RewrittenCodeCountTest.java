package dev.kpemu.machine.x86;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.StopReason;
import dev.kpemu.testing.Asm;

/**
 * The instruction clock charges a block the instructions it has now, also after the guest
 * rewrote it in place with code of the same address and size but another instruction count
 * (what Linux does with alternatives, jump labels and static calls). Expected counts are the
 * program's, written out below.
 */
class X86RewrittenCodeCountTest {
    static final long CODE = X86MachineTest.CODE, RESULTS = X86MachineTest.RESULTS;

    /**
     * {@code f} is four one-byte nops and ret (5 instructions, 5 bytes); the guest then stores
     * 0f 1f 40 00 ({@code nopl 0(%rax)}) over the nops, so {@code f} is still 5 bytes at the same
     * address but 2 instructions. call, f (5), movl, call, f (2), hlt: 11 instructions; a
     * count kept from the first translation gives 14.
     */
    @Test
    void rewrittenBlockIsChargedItsNewInstructionCount() {
        String src = """
                _start:
                  call f
                  movl $0x00401f0f, f(%rip)
                  call f
                  hlt
                  .p2align 6
                f:
                  nop
                  nop
                  nop
                  nop
                  ret
                """;
        for (int run = 0; run < 2; run++) assertEquals(11, instructionsToHalt(src));
    }

    /** The guest instructions {@code src} runs from its start to its {@code hlt}. */
    static long instructionsToHalt(String src) {
        try (X86Machine m = X86MachineTest.paged()) {
            m.memory().write(CODE, Asm.x86(src, CODE));
            m.setPc(CODE);
            StopReason r = m.run(10_000_000);
            assertInstanceOf(StopReason.Halted.class, r, r.toString());
            return m.clock().instructions();
        }
    }

    /**
     * The same rewrite many times over, alternating the two forms, with a loop around it: each
     * call of {@code f} is charged the form it runs. 200 iterations of (mov/xor to pick the form,
     * movl, call, f, dec, jnz): the 100 five-instruction calls and 100 two-instruction calls.
     */
    @Test
    void alternatingRewritesAreEachChargedTheirCount() {
        String src = """
                _start:
                  mov $200, %r12d
                  mov $0x90909090, %r13d
                  mov $0x00401f0f, %r14d
                1:
                  xchg %r13d, %r14d
                  mov %r13d, f(%rip)
                  call f
                  dec %r12d
                  jnz 1b
                  hlt
                  .p2align 6
                f:
                  nop
                  nop
                  nop
                  nop
                  ret
                """;
        // 3 (setup) + 200 x (xchg, mov, call, dec, jnz) + 100 x 2 (nopl, ret) + 100 x 5 (4 nops, ret) + hlt
        assertEquals(3 + 200 * 5 + 100 * 2 + 100 * 5 + 1, instructionsToHalt(src));
    }
}
