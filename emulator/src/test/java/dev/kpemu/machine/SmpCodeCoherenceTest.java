package dev.kpemu.machine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

import dev.kpemu.machine.SmpScheduleTest.Guest;
import dev.kpemu.machine.SmpScheduleTest.Rig;
import dev.kpemu.machine.arm64.Arm64Machine;

/**
 * arm64, bare metal: code one vCPU writes is run by the others once the writer has made it visible
 * the way Linux does (docs/smp-notes.md, step 3). Without the machine's help each engine would keep
 * running its own old translation (fact b).
 */
class SmpCodeCoherenceTest {
    static final Guest G = Guest.ARM64;

    /** The result register of f after the flag was seen (vCPU 1's last call), and a "has run f" word. */
    static long after() { return G.data() + 0x100; }
    static long seen() { return G.marker(); }

    static int word(String insn, long at) {
        return ByteBuffer.wrap(G.asm(insn, at)).order(ByteOrder.LITTLE_ENDIAN).getInt();
    }

    /**
     * vCPU 1 calls f (returns 1) in a loop, reading the flag before each call and recording f's value;
     * vCPU 0 waits until vCPU 1 has run f, rewrites f's first instruction with a guest store
     * ({@code mov x0, #2}), makes it visible with {@code maintenance}, then sets the flag. vCPU 1's
     * call after it saw the flag returns 2 (IC IVAU of f's line, IC IALLUIS, IC IALLU).
     */
    @ParameterizedTest
    @ValueSource(strings = {"dc cvau, x11\n dsb ish\n ic ivau, x11\n dsb ish\n isb\n", "dc cvau, x11\n dsb ish\n ic ialluis\n dsb ish\n isb\n",
            "dc cvau, x11\n dsb ish\n ic iallu\n dsb ish\n isb\n"})
    void codeRewrittenByOneVcpuRunsNewOnTheOther(String maintenance) throws Exception {
        assertEquals(2, rewriteAndCall(maintenance));
    }

    /** IC IVAU drops a line, not everything: naming another line of f's page leaves vCPU 1 running the old f (fact b). */
    @Test
    void icIvauOfAnotherLineLeavesTheOldCode() throws Exception {
        assertEquals(1, rewriteAndCall("add x14, x11, #0x800\n dc cvau, x14\n dsb ish\n ic ivau, x14\n dsb ish\n isb\n"));
    }

    /** Runs the two programs with {@code maintenance} after the rewrite; returns f's value in vCPU 1's call after the flag. */
    static long rewriteAndCall(String maintenance) throws Exception {
        long f = G.functionAddress();
        try (Rig r = G.rig(2)) {
            Arm64Machine m = (Arm64Machine) r.m();
            assertEquals(2, m.cacheMaintenanceHooks(), "every vCPU's engine is hooked");
            r.m().memory().write(f, G.asm("mov x0, #1\n ret\n", f));
            int newWord = word("mov x0, #2", f);
            r.load(0, Guest.imm("x13", seen()) + "wait0:\n ldr x12, [x13]\n cbz x12, wait0\n"
                    + Guest.imm("x11", f) + "movz w12, #" + (newWord & 0xffff) + "\n movk w12, #" + (newWord >>> 16) + ", lsl #16\n str w12, [x11]\n"
                    + maintenance + G.store1(G.flag()) + G.idleForever());
            r.load(1, Guest.imm("x21", G.flag()) + Guest.imm("x22", seen()) + Guest.imm("x8", f)
                    + "loop:\n ldr x23, [x21]\n blr x8\n str x0, [x22]\n cbz x23, loop\n"
                    + Guest.imm("x24", after()) + "str x0, [x24]\n" + G.idleForever());
            StopReason s = r.m().run(SmpScheduleTest.BUDGET);
            assertInstanceOf(StopReason.Halted.class, s, s.toString());
            assertEquals(newWord & 0xffff_ffffL, r.m().memory().readLong(f) & 0xffff_ffffL, "vCPU 0 rewrote f");
            assertTrue(r.m().cpuSwitches() >= 3, "vCPU 1 ran f before the rewrite and after: " + r.m().cpuSwitches());
            if (maintenance.contains("ivau")) assertEquals(1, m.lineInvalidations());
            else assertEquals(1, m.allInvalidations());
            return r.m().memory().readLong(after());
        }
    }

    /**
     * One vCPU: its engine is hooked too (an engine keeps its own blocks of text the guest patched
     * through another alias; Linux ends such patching with IC IALLU(IS)), but only IC IALLU(IS)
     * reaches Java: IC IVAU has no other engine to reach; a second vCPU hooks its own engine too.
     */
    @Test
    void oneVcpuSeesOnlyItsWholeInvalidations() throws Exception {
        try (Rig r = G.rig(1)) {
            Arm64Machine m = (Arm64Machine) r.m();
            assertEquals(1, m.cacheMaintenanceHooks());
            r.load(0, Guest.imm("x11", G.functionAddress()) + "ic ivau, x11\n ic ialluis\n" + G.idleForever());
            assertInstanceOf(StopReason.Halted.class, r.m().run(SmpScheduleTest.BUDGET));
            assertEquals(0, m.lineInvalidations());
            assertEquals(1, m.allInvalidations());
            r.m().addCpu();
            assertEquals(2, m.cacheMaintenanceHooks());
        }
    }

    /**
     * The issuing engine's own blocks: with one vCPU, f is called (translated), then rewritten by a
     * host store through the engine ({@code uc_mem_write}, which drops no translation: fact c), as
     * a store through another alias of the page leaves them (docs/smp-notes.md, "Code written through
     * an alias"); the guest's IC IVAU of f makes its next call run the new f, IC IALLU likewise.
     */
    @ParameterizedTest
    @ValueSource(strings = {"ic ivau, x11\n dsb ish\n isb\n", "ic iallu\n dsb ish\n isb\n"})
    void theIssuingEngineRunsTheNewCodeAfterItsOwnMaintenance(String maintenance) throws Exception {
        long f = G.functionAddress();
        try (Rig r = G.rig(1)) {
            r.m().memory().write(f, G.asm("mov x0, #1\n ret\n", f));
            r.load(0, Guest.imm("x8", f) + Guest.imm("x22", seen()) + Guest.imm("x21", G.flag()) + Guest.imm("x11", f)
                    + "blr x8\n str x0, [x22]\n wait:\n ldr x23, [x21]\n cbz x23, wait\n" + maintenance
                    + "blr x8\n" + Guest.imm("x24", after()) + "str x0, [x24]\n" + G.idleForever());
            for (int i = 0; i < 1000 && r.m().memory().readLong(seen()) != 1; i++) r.m().run(1000);
            assertEquals(1, r.m().memory().readLong(seen()), "the first call ran the old f");
            r.m().engine().memWrite(f, G.asm("mov x0, #2\n ret\n", f));
            r.m().engine().memWriteLong(G.flag(), 1);
            assertInstanceOf(StopReason.Halted.class, r.m().run(SmpScheduleTest.BUDGET));
            assertEquals(2, r.m().memory().readLong(after()), "the call after the maintenance ran the new f");
        }
    }
}
