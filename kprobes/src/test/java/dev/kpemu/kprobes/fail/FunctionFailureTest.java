package dev.kpemu.kprobes.fail;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.kprobes.FailureGuests;
import dev.kpemu.kprobes.Regs;
import dev.kpemu.machine.Arch;

/** A --fail spec armed on the bare-metal guest of both arches. */
class FunctionFailureTest {

    static final FunctionFailure.TaskView CAT = new FunctionFailure.TaskView() {
        @Override public String comm(Regs r) { return "cat"; }
        @Override public int pid(Regs r) { return 42; }
    };

    @ParameterizedTest
    @EnumSource(Arch.class)
    void timesFailuresThenTheBodyRunsAgain(Arch arch) {
        try (var g = FailureGuests.create(arch)) {
            List<FunctionFailure.Injection> seen = new ArrayList<>();
            FunctionFailure f = g.arm(FailSpec.parse("kprobe_target=-ENOMEM,times=2,verbose=1"), CAT, seen::add);
            assertEquals(-12L, g.call("kprobe_target", 90));
            assertEquals(-12L, g.call("kprobe_target", 90));
            assertEquals(30L, g.call("kprobe_target", 90), "times=2 used up: the body runs");
            assertEquals(3, f.calls());
            assertEquals(2, seen.size());
            assertEquals("FAULT_INJECTION: forcing a failure.\nname fail_function, interval 1, probability 100, space 0, times 2\n", seen.get(0).dump());
            assertEquals("cat", seen.get(0).comm());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void nthAndCallerSelect(Arch arch) {
        try (var g = FailureGuests.create(arch)) {
            String caller = arch == Arch.X86_64 ? "rel32_call" : "bl_func";
            g.arm(FailSpec.parse("kprobe_target=-5,caller=" + caller + ",nth=2"), CAT, i -> {});
            assertEquals(130L, g.call(caller, 90), "first call from the caller: not the 2nd");
            assertEquals(30L, g.call("kprobe_target", 90), "a call from elsewhere does not count");
            assertEquals(-5L + 100, g.call(caller, 90), "the 2nd call from the caller fails");
            assertEquals(130L, g.call(caller, 90), "times=1 by default");
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void commFilterLetsOtherTasksThrough(Arch arch) {
        try (var g = FailureGuests.create(arch)) {
            var f = g.arm(FailSpec.parse("kprobe_target=-1,comm=sh,times=-1"), CAT, i -> {});
            assertEquals(30L, g.call("kprobe_target", 90));
            assertEquals(0, f.injections().size());
        }
    }
}
