package dev.kpemu.machine.arm64;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.util.HashSet;
import java.util.Set;

import org.junit.jupiter.api.Test;

import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;

/**
 * The places of X0 to X30, SP and PC in a saved context ({@code ContextRegisters}) that the native
 * probe recorder copies them from: each found once, inside the prefix the recorder's context saves
 * (up to the PC), and holding what the register API reads on another engine with other values.
 */
class Arm64ContextRegistersTest {
    @Test
    void eachRegisterLiesInThePrefixTheRecorderSavesAndHoldsTheEnginesValue() {
        int[] regs = new int[33];
        for (int i = 0; i <= 28; i++) regs[i] = Arm64Reg.X0 + i;
        regs[29] = Arm64Reg.X29;
        regs[30] = Arm64Reg.X30;
        regs[31] = Arm64Reg.SP;
        regs[32] = Arm64Reg.PC;
        long end = ExceptionStateLayout.get().pcOffset() + 8;
        Set<Long> seen = new HashSet<>();
        for (int id : regs) {
            long off = Arm64Machine.contextOffsetOf(id);
            assertTrue(off >= 0 && off + 8 <= end, "register " + id + " at " + off + ", the prefix ends at " + end);
            assertTrue(seen.add(off), "one place per register: " + off);
        }
        assertEquals(-1, Arm64Machine.contextOffsetOf(Arm64Reg.PSTATE), "PSTATE is computed when read: through the engine");
        try (Unicorn uc = Arm64Machine.openEngine(); Unicorn.Context ctx = uc.contextAllocPrefix(end)) {
            for (int i = 0; i < regs.length; i++) uc.regWrite(regs[i], 0xffff_8000_0123_4000L + 0x1000L * i + 8L * i);
            uc.contextSave(ctx);
            for (int id : regs) {
                assertEquals(uc.regRead(id), ctx.blob().get(ValueLayout.JAVA_LONG_UNALIGNED, Arm64Machine.contextOffsetOf(id)), "register " + id);
            }
        }
    }
}
