package dev.kpemu.machine.arm64;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.ContextRegistersCheck;
import dev.kpemu.unicorn.Arm64Reg;

/** X0 to X30, SP and PC where the native probe recorder copies them from ({@link ContextRegistersCheck}); PSTATE through the engine. */
class Arm64ContextRegistersTest {
    @Test
    void eachRegisterLiesInThePrefixTheRecorderSavesAndHoldsTheEnginesValue() {
        ContextRegistersCheck.check(Arm64Machine.CONTEXT_REGISTERS, ExceptionStateLayout.get().pcOffset() + 8, Arm64Machine::openEngine, Arm64Reg.PSTATE);
    }
}
