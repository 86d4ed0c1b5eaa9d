package dev.kpemu.machine.x86;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * The facts the CX16 route rests on, measured on the engine itself: with an engine CPU model
 * without CX16 (Opteron_G1; qemu64 is Opteron_G1 plus CX16, LAHF_LM and SVM in the feature words
 * the translator checks), Unicorn 2.1.4 raises #UD for {@code cmpxchg16b} and calls the
 * invalid-instruction hook with RIP at the instruction and RFLAGS exact (the exception's state
 * restore stores the block's pending flags operation), even after an {@code add} in the same block.
 */
class X86Cx16EngineModelProbeTest {
    static final long CODE = 0x1000, DATA = 0x2000;

    @Test
    void cmpxchg16bTrapsWithExactFlagsOnAnEngineWithoutCx16() {
        byte[] code = Asm.x86("""
                _start:
                  mov $0x2000, %esi
                  mov $0x4700, %edi
                  xor %r8d, %r8d
                  add %rdi, %r8
                  lock cmpxchg16b (%rsi)
                  hlt
                """, CODE);
        long cx16At = CODE + code.length - 1 - 5; // lock + REX.W + 0f c7 0e, then hlt
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64, Unicorn.CPU_X86_OPTERON_G1)) {
            uc.memMap(0, 0x10000, Unicorn.PROT_ALL);
            uc.memWrite(CODE, code);
            long[] seen = {-1, -1, 0};
            uc.hookInvalidInstruction(u -> {
                seen[0] = u.regRead(X86Reg.RIP);
                seen[1] = u.regRead(X86Reg.RFLAGS);
                seen[2]++;
                return false;
            });
            try {
                uc.start(CODE, CODE + code.length, 0, 0);
            } catch (RuntimeException expected) {
                // UC_ERR_INSN_INVALID: the hook declined
            }
            assertEquals(1, seen[2], "one #UD");
            assertEquals(cx16At, seen[0], "RIP at cmpxchg16b");
            assertEquals(0x2 | 0x4, seen[1] & 0xfff, "RFLAGS = add's (PF), not its source operand");
        }
    }
}
