package dev.kpemu.kprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;

/**
 * Linux's KUnit {@code lib/test_kprobes.c} on guest programs of both arches: the guest
 * functions carry the kernel test's names and bodies ({@code kprobe_target(v) = v / 3} …), the
 * JUnit body plays the test module (it calls the targets through the guest, and handlers call
 * guest functions through the {@link GuestFunctionCall} fixture).
 */
class KprobesKunitTest {
    static final long DIV_FACTOR = 3;
    static final long RAND1 = 0x7fd3_1a2bL; // get_random_u32_above(div_factor)

    long prehVal, posthVal, krphVal;

    static void noHandlerFailures(Kprobes k) {
        if (k.lastHandlerFailure() != null) throw new AssertionError("a handler failed", k.lastHandlerFailure());
        assertEquals(0, k.handlerFailures());
    }

    Kprobe kp() {
        return Kprobe.at("kprobe_target", 0)
                .pre((p, r) -> {
                    prehVal = RAND1 / DIV_FACTOR;
                    return 0;
                })
                .post((p, r, f) -> {
                    assertEquals(RAND1 / DIV_FACTOR, prehVal);
                    posthVal = prehVal + DIV_FACTOR;
                });
    }

    Kprobe kp2() {
        return Kprobe.at("kprobe_target2", 0)
                .pre((p, r) -> {
                    prehVal = RAND1 / DIV_FACTOR + 1;
                    return 0;
                })
                .post((p, r, f) -> {
                    assertEquals(RAND1 / DIV_FACTOR + 1, prehVal);
                    posthVal = prehVal + DIV_FACTOR;
                });
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void test_kprobe(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            Kprobe kp = kp();
            k.register(kp);
            assertEquals(RAND1 / 3, g.call("kprobe_target", RAND1));
            k.unregister(kp);
            assertNotEquals(0, prehVal);
            assertNotEquals(0, posthVal);
            noHandlerFailures(k);
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void test_kprobes(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            Kprobe kp = kp(), kp2 = kp2();
            k.registerAll(List.of(kp, kp2));
            prehVal = posthVal = 0;
            assertEquals(RAND1 / 3, g.call("kprobe_target", RAND1));
            assertNotEquals(0, prehVal);
            assertNotEquals(0, posthVal);
            prehVal = posthVal = 0;
            assertEquals(RAND1 / 3 + 1, g.call("kprobe_target2", RAND1));
            assertNotEquals(0, prehVal);
            assertNotEquals(0, posthVal);
            k.unregisterAll(List.of(kp, kp2));
            noHandlerFailures(k);
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void test_kprobe_missed(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            long recursed = g.sym("kprobe_recursed_target");
            GuestFunctionCall guest = GuestFunctionCall.on(k);
            Kprobe missed = Kprobe.at("kprobe_recursed_target", 0)
                    .pre((p, r) -> {
                        prehVal = guest.call(recursed, RAND1);
                        return 0;
                    })
                    .post((p, r, f) -> posthVal = guest.call(recursed, RAND1));
            k.register(missed);
            assertEquals(RAND1 / 3, g.call("kprobe_recursed_target", RAND1));
            assertEquals(2, missed.nmissed(), "one reentry from the pre handler, one from the post handler");
            assertEquals(RAND1 / 3, prehVal);
            assertEquals(RAND1 / 3, posthVal);
            k.unregister(missed);
            noHandlerFailures(k);
        }
    }

    Kretprobe rp() {
        return Kretprobe.at("kprobe_target")
                .entryHandler((ri, r) -> {
                    krphVal = RAND1 / DIV_FACTOR;
                    return 0;
                })
                .handler((ri, r) -> {
                    assertEquals(RAND1 / DIV_FACTOR, r.returnValue());
                    assertNotEquals(0, krphVal);
                    krphVal = RAND1;
                    return 0;
                });
    }

    Kretprobe rp2() {
        return Kretprobe.at("kprobe_target2")
                .entryHandler((ri, r) -> {
                    krphVal = RAND1 / DIV_FACTOR + 1;
                    return 0;
                })
                .handler((ri, r) -> {
                    assertEquals(RAND1 / DIV_FACTOR + 1, r.returnValue());
                    assertNotEquals(0, krphVal);
                    krphVal = RAND1;
                    return 0;
                });
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void test_kretprobe(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            Kretprobe rp = rp();
            k.register(rp);
            assertEquals(RAND1 / 3, g.call("kprobe_target", RAND1));
            k.unregister(rp);
            assertEquals(RAND1, krphVal);
            noHandlerFailures(k);
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void test_kretprobes(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            Kretprobe rp = rp(), rp2 = rp2();
            k.registerAllKretprobes(List.of(rp, rp2));
            krphVal = 0;
            assertEquals(RAND1 / 3, g.call("kprobe_target", RAND1));
            assertEquals(RAND1, krphVal);
            krphVal = 0;
            assertEquals(RAND1 / 3 + 1, g.call("kprobe_target2", RAND1));
            assertEquals(RAND1, krphVal);
            k.unregisterAllKretprobes(List.of(rp, rp2));
            noHandlerFailures(k);
        }
    }

    /** {@code stacktrace_return_handler}: the return value and the traces hold the real return address. */
    static Kretprobe.Handler stacktraceReturnHandler(Guest g, Kprobes k, int[] ran) {
        return (ri, r) -> {
            long ret1 = g.data(Guest.RET_ADDR1);
            assertEquals(ret1, r.returnValue());
            assertEquals(ret1, ri.returnAddress());
            long[] trace = k.stackTrace(r, 64);
            assertEquals(ret1, trace[0], "stack_trace_save_regs starts at the real return address");
            boolean found = false;
            for (long a : trace) found |= a == ret1;
            assertEquals(true, found);
            for (long a : trace) assertNotEquals(k.trampolineAddress(), a, "no trampoline in the trace");
            ran[0]++;
            return 0;
        };
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void test_stacktrace_on_kretprobe(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            g.setData(Guest.TARGET_PTR, g.sym("kprobe_stacktrace_target"));
            long myretaddr = g.call("kprobe_stacktrace_driver"); // records target_return_address[1]
            int[] ran = {0};
            Kretprobe rp3 = Kretprobe.at("kprobe_stacktrace_target").handler(stacktraceReturnHandler(g, k, ran));
            k.register(rp3);
            assertEquals(myretaddr, g.call("kprobe_stacktrace_driver"));
            k.unregister(rp3);
            assertEquals(1, ran[0]);
            noHandlerFailures(k);
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void test_stacktrace_on_nested_kretprobe(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            g.setData(Guest.TARGET_PTR, g.sym("kprobe_stacktrace_target"));
            g.setData(Guest.INTERNAL_PTR, g.sym("kprobe_stacktrace_internal_target"));
            long myretaddr = g.call("kprobe_stacktrace_driver");
            int[] ran = {0, 0};
            Kretprobe rp3 = Kretprobe.at("kprobe_stacktrace_target").handler(stacktraceReturnHandler(g, k, ran));
            Kretprobe rp4 = Kretprobe.at("kprobe_stacktrace_internal_target").handler((ri, r) -> {
                long ret0 = g.data(Guest.RET_ADDR0), ret1 = g.data(Guest.RET_ADDR1);
                assertEquals(ret0, r.returnValue());
                long[] trace = k.stackTrace(r, 64);
                assertEquals(ret0, trace[0], "the trace starts at the inner real return address");
                assertEquals(ret1, trace[1], "followed by the outer one, not the trampoline");
                ran[1]++;
                return 0;
            });
            k.registerAllKretprobes(List.of(rp3, rp4));
            assertEquals(myretaddr, g.call("kprobe_stacktrace_driver"));
            k.unregisterAllKretprobes(List.of(rp3, rp4));
            assertEquals(1, ran[0]);
            assertEquals(1, ran[1]);
            assertEquals(0, k.outstandingInstances());
            noHandlerFailures(k);
        }
    }
}
