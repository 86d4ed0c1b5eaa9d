package dev.kpemu.machine.x86;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.ContextRegistersCheck;
import dev.kpemu.unicorn.X86Reg;

/** RAX to R15 and RIP where the native probe recorder copies them from ({@link ContextRegistersCheck}); RFLAGS through the engine. */
class X86ContextRegistersTest {
    @Test
    void eachRegisterLiesInThePrefixTheRecorderSavesAndHoldsTheEnginesValue() {
        ContextRegistersCheck.check(X86Machine.CONTEXT_REGISTERS, X86ContextLayout.get().privilegeEnd(), X86Machine::openEngine, X86Reg.RFLAGS);
    }
}
