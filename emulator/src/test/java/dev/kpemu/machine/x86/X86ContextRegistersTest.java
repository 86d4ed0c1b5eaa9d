package dev.kpemu.machine.x86;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.util.HashSet;
import java.util.Set;

import org.junit.jupiter.api.Test;

import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * The places of RAX to R15 and RIP in a saved context ({@code ContextRegisters}) that the native
 * probe recorder copies them from: each found once, inside the prefix the recorder's context saves
 * ({@link X86ContextLayout#privilegeEnd}), and holding what the register API reads on another engine
 * with other values.
 */
class X86ContextRegistersTest {
    private static final int[] REGS = {X86Reg.RAX, X86Reg.RBX, X86Reg.RCX, X86Reg.RDX, X86Reg.RSI, X86Reg.RDI, X86Reg.RBP,
        X86Reg.RSP, X86Reg.R8, X86Reg.R9, X86Reg.R10, X86Reg.R11, X86Reg.R12, X86Reg.R13, X86Reg.R14, X86Reg.R15, X86Reg.RIP};

    @Test
    void eachRegisterLiesInThePrefixTheRecorderSavesAndHoldsTheEnginesValue() {
        long end = X86ContextLayout.get().privilegeEnd();
        Set<Long> seen = new HashSet<>();
        for (int id : REGS) {
            long off = X86Machine.contextOffsetOf(id);
            assertTrue(off >= 0 && off + 8 <= end, "register " + id + " at " + off + ", the prefix ends at " + end);
            assertTrue(seen.add(off), "one place per register: " + off);
        }
        assertEquals(-1, X86Machine.contextOffsetOf(X86Reg.RFLAGS), "flags are computed when read: through the engine");
        try (Unicorn uc = X86Machine.openEngine(); Unicorn.Context ctx = uc.contextAllocPrefix(end)) {
            for (int i = 0; i < REGS.length; i++) uc.regWrite(REGS[i], 0xffff_8880_0123_4000L + 0x1000L * i + i);
            uc.contextSave(ctx);
            for (int id : REGS) {
                assertEquals(uc.regRead(id), ctx.blob().get(ValueLayout.JAVA_LONG_UNALIGNED, X86Machine.contextOffsetOf(id)), "register " + id);
            }
        }
    }
}
