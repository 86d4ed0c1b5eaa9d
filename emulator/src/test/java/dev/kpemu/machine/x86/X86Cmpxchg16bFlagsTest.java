package dev.kpemu.machine.x86;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.board.X86Pc;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.X86Reg;

/**
 * The flags {@code cmpxchg16b} leaves on kpemu's x86 machine, which shows CX16 to the guest
 * ({@link X86Pc#cpuPolicy}). Unicorn 2.1.4's own translation of the instruction computes the other
 * flags from the CPU state's stored flags operation, which the translator has not written yet
 * when an arithmetic instruction earlier in the same block set the flags; when the block began
 * with the flags held as a whole RFLAGS value (every {@code uc_emu_start}, i.e. every run-loop
 * slice, and the block after {@code iret} or {@code popf}), the arithmetic instruction's source
 * operand was taken for RFLAGS (Debian 13's 6.12: a freelist pointer's low half in
 * {@code kmem_cache_alloc}, with TF set a #DB). kpemu's engines therefore lack CX16 and its native
 * hook executes the instruction ({@link NativeCmpxchg16b}); these tests guard that the guest
 * sees the architecture's flags in exactly the case Unicorn got wrong.
 * <p>
 * Each program starts a slice, so its first block begins that way; the expected RFLAGS are the
 * architecture's (Intel SDM: CMPXCHG16B sets ZF and leaves CF, PF, AF, SF and OF unchanged),
 * computed by hand: {@code add} of 0x4700 to 0 gives PF (the low byte 0x00 has even parity) and
 * no other arithmetic flag; the exchange succeeds and sets ZF; bit 1 is always set.
 */
class X86Cmpxchg16bFlagsTest {
    static final long CODE = X86MachineTest.CODE, DATA = X86MachineTest.RESULTS;
    static final long PF = 1 << 2, ZF = 1 << 6, FIXED = 1 << 1;

    /** Runs {@code body} after setting up a successful exchange of the 16 zero bytes at DATA; returns the pushed RFLAGS. */
    static long flagsAfter(String body) {
        String src = """
                _start:
                  mov $0x200000, %rsi
                  mov $0, %eax
                  mov $0, %edx
                  mov $1, %ebx
                  mov $2, %ecx
                  mov $0x4700, %edi
                  mov $0, %r8d
                """ + body + """
                  pushfq
                  pop %r9
                  hlt
                """;
        try (X86Machine m = X86MachineTest.paged()) {
            m.memory().write(CODE, Asm.x86(src, CODE));
            m.setPc(CODE);
            assertInstanceOf(StopReason.Halted.class, m.run(1_000_000));
            assertEquals(1, m.memory().readLong(DATA), "the exchange happened");
            assertEquals(2, m.memory().readLong(DATA + 8), "the exchange happened");
            return m.engine().regRead(X86Reg.R9);
        }
    }

    @Test
    void cmpxchg16bAloneInItsBlockKeepsTheFlags() {
        // the add's flags are stored when its block ends (the jump), so the helper reads them right
        assertEquals(FIXED | PF | ZF, flagsAfter("""
                  add %rdi, %r8
                  jmp 1f
                1: cmpxchg16b (%rsi)
                """));
        // no arithmetic instruction before it in the block: the whole-RFLAGS state is still true
        assertEquals(FIXED | ZF, flagsAfter("""
                  cmpxchg16b (%rsi)
                """));
    }

    /**
     * The guest may see CX16 exactly when the machine's {@code cmpxchg16b} after an {@code add} in
     * the same block leaves the architecture's flags. Unicorn 2.1.4's own translation leaves the
     * add's source operand (0x4700: TF, IF, DF, NT) as RFLAGS; the native hook leaves the
     * architecture's (without kpemu's native library the guest's CPUID hides CX16 instead).
     */
    @Test
    void guestSeesCx16OnlyWhenTheEngineComputesItsFlagsRight() {
        long flags = flagsAfter("""
                  add %rdi, %r8
                  cmpxchg16b (%rsi)
                """);
        boolean engineRight = flags == (FIXED | PF | ZF);
        boolean guestCx16 = (X86Pc.cpuPolicy(X86Cpuid.probe(), false).get(1, 0).ecx() & X86Cpuid.L1_ECX_CX16) != 0;
        assertEquals(engineRight, guestCx16, String.format(
                "RFLAGS after add+cmpxchg16b in one block: %#x (architecture: %#x); the guest's CPUID %s CX16",
                flags, FIXED | PF | ZF, guestCx16 ? "has" : "hides"));
    }
}
