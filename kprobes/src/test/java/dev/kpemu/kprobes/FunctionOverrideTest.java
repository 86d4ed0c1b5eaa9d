package dev.kpemu.kprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;

/**
 * {@code override_function_with_return} (arch/x86/lib/error-inject.c, arch/arm64/lib/error-inject.c)
 * from an entry probe's pre handler: the body does not run, the caller gets the value, and the
 * stack pointer is as Linux leaves it (x86 the return address popped: sp + 8; arm64 unchanged).
 */
class FunctionOverrideTest {

    @ParameterizedTest
    @EnumSource(Arch.class)
    void theCallerSeesTheValueAndTheBodyDoesNotRun(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            int[] bodyHits = {0};
            long[] sp = new long[2];
            k.register(Kprobe.at(g.find("kprobe_target", arch == Arch.X86_64 ? "div" : "udiv"))
                    .pre((p, r) -> { bodyHits[0]++; return 0; }));
            k.register(Kprobe.at("kprobe_target", 0).pre((p, r) -> {
                sp[0] = r.sp();
                k.overrideFunctionWithReturn(r, -12);
                sp[1] = r.sp();
                return 1;
            }));
            String caller = arch == Arch.X86_64 ? "rel32_call" : "bl_func";
            assertEquals(-12 + 100, g.call(caller, 90), "the caller adds 100 to what kprobe_target returned");
            assertEquals(0, bodyHits[0], "kprobe_target's body did not run");
            assertEquals(arch == Arch.X86_64 ? sp[0] + 8 : sp[0], sp[1]);
            assertEquals(-12L, g.call("kprobe_target", 90), "a direct call returns the value as a 64-bit -12");
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void withoutTheOverrideTheBodyRuns(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            int[] bodyHits = {0};
            k.register(Kprobe.at(g.find("kprobe_target", arch == Arch.X86_64 ? "div" : "udiv"))
                    .pre((p, r) -> { bodyHits[0]++; return 0; }));
            String caller = arch == Arch.X86_64 ? "rel32_call" : "bl_func";
            assertEquals(30 + 100, g.call(caller, 90));
            assertEquals(1, bodyHits[0]);
        }
    }
}
