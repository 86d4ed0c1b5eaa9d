package dev.kpemu.optprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.StopReason;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Why the detour hand-off is a block hook and host breakpoints live in the C block hook: on
 * Unicorn 2.1.1, once any {@code UC_HOOK_CODE} existed (even on an address never executed), a
 * run-loop slice that the instruction clock stopped from its block hook, in code translated
 * earlier, left the pc at the start of the previous block while that block's effects stayed (pc
 * at the function start here, and an endless loop). Unicorn 2.1.4 leaves the pc exact with a
 * code hook too; this test pins both hook kinds to the unhooked result.
 */
class CodeHookRewindTest {

    static long pcAfterOneSlice(Arch arch, int hookKind) {
        try (EngineGuest g = new EngineGuest(arch, Functions.basic(arch))) {
            long unused = g.slots.virtualBase() + 0x30;
            if (hookKind == 1) g.machine.engine().hookCode(unused, unused, (u, a, n) -> {});
            if (hookKind == 2) g.machine.engine().hookBlock(unused, unused, (u, a, n) -> {});
            g.call("mul_loop", 100_000);                       // translate the loop
            g.prepareCall("mul_loop", 3);
            StopReason r = g.machine.run(1);                  // one block, stopped before the next
            assertEquals(StopReason.BudgetExhausted.class, r.getClass());
            return g.machine.pc();
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void blockAndCodeHooksLeaveTheRunLoopExact(Arch arch) {
        long none = pcAfterOneSlice(arch, 0);
        long code = pcAfterOneSlice(arch, 1);
        long block = pcAfterOneSlice(arch, 2);
        long start = arch == Arch.X86_64 ? EngineGuest.X86_TEXT + 0x200 : EngineGuest.A_TEXT + 0x200;
        System.out.printf("%s pc after one slice: no hook %#x, code hook elsewhere %#x (function start %#x), block hook elsewhere %#x%n",
                arch, none, code, start, block);
        assertEquals(none, block, "block hook elsewhere");
        assertEquals(none, code, "code hook elsewhere (Unicorn 2.1.1 rewound to the function start)");
    }
}
