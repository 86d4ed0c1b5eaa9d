package dev.kpemu.machine.x86;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.StopReason;
import dev.kpemu.testing.Asm;

/**
 * When an external interrupt the guest masked is taken. Expected values are the guest
 * program's own: its instruction counts, written out below, and the addresses its assembler gave.
 */
class X86InterruptDeliveryTest {
    static final long CODE = X86MachineTest.CODE, RESULTS = X86MachineTest.RESULTS;

    /**
     * A loop of exactly 100 instructions that keeps IF clear for 96 of them and sets it with
     * {@code sti}, whose shadow covers the {@code nop} after it. The vector is pending from the
     * start and the slice is 1,000 instructions, ten iterations: a boundary that falls where IF
     * is clear falls there again at every later slice, so an interrupt taken only at slice
     * boundaries would never be taken (Linux 6.12's try_to_generate_entropy met this with a
     * 6,250-instruction loop and 200,000-instruction slices). The CPU takes it after the
     * shadow's instruction: the handler sees the return address of label 3.
     *
     * Instructions: the setup, 50 (gate macro 9, lidt, lea, mov, 38 nops); one iteration up to and
     * including the nop, 98 (cli, mov, 47 x (inc, loop), sti, nop); the handler, 4; then cmp, je,
     * cli, hlt, 4: 156 in all.
     */
    @Test
    void maskedInterruptIsTakenWhereTheGuestEnablesInterrupts() {
        String src = X86MachineTest.SETUP_GATES + """
                _start:
                  gate 0x20, handler
                  lidt idtr(%rip)
                  lea 3f(%rip), %rax
                  mov %rax, 0x200010
                  .rept 38
                  nop
                  .endr
                spin:
                  cli
                  mov $47, %ecx
                1: inc %rbx
                  loop 1b
                  sti
                  nop
                3: cmpq $0, 0x200000
                  je spin
                  cli
                  hlt
                handler:
                  mov (%rsp), %rax
                  mov %rax, 0x200008
                  incq 0x200000
                  iretq
                idtr: .word 0xfff
                  .quad 0x6000
                """;
        long[][] runs = new long[2][];
        for (int run = 0; run < 2; run++) {
            try (X86Machine m = X86MachineTest.paged()) {
                m.memory().write(CODE, Asm.x86(src, CODE));
                m.setPc(CODE);
                m.setSliceInstructions(1_000);
                m.setInterruptLine(0x20, true);
                StopReason r = m.run(1_000_000);
                assertInstanceOf(StopReason.Halted.class, r, r.toString());
                assertEquals(1, m.memory().readLong(RESULTS), "interrupts taken");
                assertEquals(m.memory().readLong(RESULTS + 0x10), m.memory().readLong(RESULTS + 8),
                        "taken after the instruction in sti's shadow");
                assertEquals(156, m.clock().instructions());
                runs[run] = new long[] {m.memory().readLong(RESULTS + 8), m.clock().instructions()};
            }
        }
        assertEquals(runs[0][0], runs[1][0]);
        assertEquals(runs[0][1], runs[1][1]);
    }
}
