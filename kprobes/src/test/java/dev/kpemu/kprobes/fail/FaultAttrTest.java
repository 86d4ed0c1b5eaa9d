package dev.kpemu.kprobes.fail;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/** lib/fault-inject.c's {@code should_fail_ex} arithmetic with size 1, plus kpemu's selectors. */
class FaultAttrTest {

    record TestCall(String comm, int pid, String frame) implements FaultAttr.Call {
        @Override public boolean hasCaller(String symbol) { return symbol.equals(frame); }
    }

    static final TestCall CAT = new TestCall("cat", 100, "do_sys_openat2");
    static final TestCall SH = new TestCall("sh", 99, "do_execveat_common");

    /** The 1-based numbers of the calls among {@code calls} that fail. */
    static List<Integer> failing(FaultAttr a, int calls, TestCall call) {
        List<Integer> out = new ArrayList<>();
        for (int i = 1; i <= calls; i++) {
            if (a.shouldFail(call)) {
                a.consumeTime();
                out.add(i);
            }
        }
        return out;
    }

    @Test
    void timesDefaultsToOneFailureAndMinusOneIsUnlimited() {
        assertEquals(List.of(1), failing(FaultAttr.builder().build(), 5, CAT));
        assertEquals(List.of(1, 2, 3), failing(FaultAttr.builder().times(3).build(), 5, CAT));
        assertEquals(List.of(1, 2, 3, 4, 5), failing(FaultAttr.builder().times(-1).build(), 5, CAT));
    }

    /** A call by a task whose ancestry (itself first) is {@code lineage}. */
    record TreeCall(int... lineage) implements FaultAttr.Call {
        @Override public String comm() { return "sh"; }
        @Override public int pid() { return lineage[0]; }
        @Override public boolean descendsFrom(int pid) { return java.util.Arrays.stream(lineage).anyMatch(p -> p == pid); }
        @Override public boolean hasCaller(String symbol) { return false; }
    }

    @Test
    void treeLetsThroughTheTaskAndItsDescendantsOnly() {
        FaultAttr a = FaultAttr.builder().tree(88).times(-1).build();
        assertEquals(true, a.shouldFail(new TreeCall(88, 1)));
        assertEquals(true, a.shouldFail(new TreeCall(90, 88, 1)));
        assertEquals(false, a.shouldFail(new TreeCall(89, 1)));
        // nth counts only the calls the tree lets through
        FaultAttr second = FaultAttr.builder().tree(88).nth(2).build();
        assertEquals(false, second.shouldFail(new TreeCall(88, 1)));
        assertEquals(false, second.shouldFail(new TreeCall(87, 1)));
        assertEquals(true, second.shouldFail(new TreeCall(90, 88, 1)));
        assertEquals("__x64_sys_openat=-22,tree=88,nth=2", FailSpec.parse("__x64_sys_openat=-22,tree=88,nth=2").format());
    }

    @Test
    void afterExecCountsTheTreesCallsOnlyOnceItsTaskExecd() {
        FaultAttr a = FailSpec.parse("f=-22,tree=88,after=exec,nth=2").attr(FaultAttr.DEFAULT_SEED);
        // the fork's calls before its exec pass no filter and are not counted
        assertEquals(false, a.shouldFail(new TreeCall(88, 1)));
        assertEquals(false, a.shouldFail(new TreeCall(88, 1)));
        a.execSeen();
        assertEquals(false, a.shouldFail(new TreeCall(88, 1)));
        assertEquals(false, a.shouldFail(new TreeCall(89, 1)));
        assertEquals(true, a.shouldFail(new TreeCall(90, 88, 1)));
        assertEquals("f=-22,tree=88,after=exec,nth=2", FailSpec.parse("f=-22,tree=88,after=exec,nth=2").format());
    }

    @Test
    void intervalFailsEveryIntervalthCall() {
        assertEquals(List.of(3, 6, 9), failing(FaultAttr.builder().interval(3).times(-1).build(), 10, CAT));
    }

    @Test
    void spaceIsUsedUpBeforeTheFirstFailure() {
        // space 3 > 1: 3 -> 2 (call 1), 2 -> 1 (call 2); call 3 sees 1, not > 1, and fails
        assertEquals(List.of(3), failing(FaultAttr.builder().space(3).build(), 5, CAT));
    }

    @Test
    void probabilityZeroNeverFailsAndTheDrawIsTheSameForTheSameSeed() {
        assertEquals(List.of(), failing(FaultAttr.builder().probability(0).times(-1).build(), 100, CAT));
        List<Integer> a = failing(FaultAttr.builder().probability(30).times(-1).build(), 200, CAT);
        List<Integer> b = failing(FaultAttr.builder().probability(30).times(-1).build(), 200, CAT);
        assertEquals(a, b, "the default seed gives the same draws");
        assertEquals(true, a.size() > 30 && a.size() < 100, "about 30 of 200: " + a.size());
        List<Integer> other = failing(FaultAttr.builder().probability(30).times(-1).seed(7).build(), 200, CAT);
        assertEquals(false, a.equals(other), "another seed, other draws");
    }

    @Test
    void taskFilterCallerAndNthSelect() {
        FaultAttr byComm = FaultAttr.builder().comm("cat").times(-1).build();
        assertEquals(false, byComm.shouldFail(SH));
        assertEquals(true, byComm.shouldFail(CAT));
        FaultAttr byPid = FaultAttr.builder().pid(99).times(-1).build();
        assertEquals(false, byPid.shouldFail(CAT));
        assertEquals(true, byPid.shouldFail(SH));
        FaultAttr byCaller = FaultAttr.builder().caller("do_sys_openat2").times(-1).build();
        assertEquals(false, byCaller.shouldFail(SH));
        assertEquals(true, byCaller.shouldFail(CAT));
        // nth counts only the calls that passed the other checks: sh's calls do not count
        FaultAttr nth = FaultAttr.builder().comm("cat").nth(2).times(-1).build();
        List<Boolean> seen = new ArrayList<>();
        for (TestCall c : List.of(SH, CAT, SH, CAT, CAT)) seen.add(nth.shouldFail(c));
        assertEquals(List.of(false, false, false, true, false), seen);
    }

    @Test
    void dumpIsLinuxsFailDumpWithTimesBeforeTheDecrement() {
        FaultAttr a = FaultAttr.builder().times(2).verbose(1).build();
        assertEquals(true, a.shouldFail(CAT));
        assertEquals("FAULT_INJECTION: forcing a failure.\nname fail_function, interval 1, probability 100, space 0, times 2\n",
                a.dump("fail_function"));
        a.consumeTime();
        assertEquals(1, a.times());
        assertEquals("", FaultAttr.builder().verbose(0).build().dump("fail_function"));
    }

    @Test
    void badValuesAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> FaultAttr.builder().probability(101));
        assertThrows(IllegalArgumentException.class, () -> FaultAttr.builder().times(-2));
        assertThrows(IllegalArgumentException.class, () -> FaultAttr.builder().nth(0));
        assertThrows(IllegalArgumentException.class, () -> FaultAttr.builder().verbose(3));
    }
}
