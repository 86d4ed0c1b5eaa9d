package dev.kpemu.machine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.SmpScheduleTest.Guest;
import dev.kpemu.machine.SmpScheduleTest.Rig;
import dev.kpemu.machine.snapshot.MachineSnapshot;
import dev.kpemu.machine.snapshot.SnapshotException;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.X86Reg;

/**
 * Snapshots of a machine with several vCPUs (issue 26, docs/smp-notes.md step 7), bare metal on
 * each arch's board ({@link SmpScheduleTest}'s guests): a machine saved between runs (in the middle
 * of a quantum, or at a host breakpoint another vCPU than 0 reached) and restored into a freshly
 * built one continues exactly as the saved one does — the same switches at the same PCs with the
 * same quanta, the same lost (racy) or summed (locked, arm64 LDAXR/STXR) increments, every vCPU's
 * registers, the same instruction count — on the default round-robin and on seeded schedules. A
 * snapshot of N vCPUs is refused by a machine of another count, in one line.
 */
class SmpSnapshotTest {
    static final Map<String, String> ID = Map.of("test", "smp-snapshot");

    /** What a run shows from a point on: the switches (vCPU@pc/quantum), the counter, the clock, each vCPU's registers. */
    record Outcome(List<String> switches, long counter, long instructions, long nanos, List<Long> registers, List<Machine.CpuState> states) {}

    enum Program { RACY, LOCKED }

    static Rig rig(Guest g, int n, long seed, Program p, long breakAt) {
        Rig r = g.rig(n);
        r.m().setSchedule(Schedule.of(seed));
        if (breakAt != 0) r.m().addBreakpoint(breakAt);
        for (int cpu = 0; cpu < n; cpu++) r.load(cpu, p == Program.RACY ? g.racyIncrement(60_000) : g.lockedIncrement(60_000));
        return r;
    }

    static List<String> record(Machine m) {
        List<String> log = new ArrayList<>();
        m.setSwitchObserver((cpu, pc, quantum) -> log.add(cpu + "@" + Long.toHexString(pc) + "/" + quantum));
        return log;
    }

    /** Runs {@code r} to its end (every vCPU halted for good; a breakpoint stop is stepped over). */
    static Outcome finish(Guest g, Rig r, List<String> log) {
        StopReason s;
        do {
            s = r.m().run(SmpScheduleTest.BUDGET);
        } while (s instanceof StopReason.Breakpoint);
        assertInstanceOf(StopReason.Halted.class, s, s.toString());
        List<Long> regs = new ArrayList<>();
        List<Machine.CpuState> states = new ArrayList<>();
        for (int cpu = 0; cpu < r.m().cpuCount(); cpu++) {
            var e = r.m().engine(cpu);
            for (int reg : g == Guest.X86 ? new int[] {X86Reg.RDX, X86Reg.RCX, X86Reg.RIP, X86Reg.RSP, X86Reg.RFLAGS}
                    : new int[] {Arm64Reg.X5, Arm64Reg.X3, Arm64Reg.X4, Arm64Reg.PC, Arm64Reg.SP, Arm64Reg.PSTATE}) regs.add(e.regRead(reg));
            states.add(r.m().cpuState(cpu));
        }
        return new Outcome(List.copyOf(log), r.counter(), r.m().clock().instructions(), r.m().clock().nanos(), regs, states);
    }

    /**
     * A run saved at {@code until} (a budget: mid-quantum) or at the breakpoint {@code breakAt},
     * then finished; and a fresh machine restored from the bytes and finished. Both must be the
     * uninterrupted run of the same seed from the point on.
     */
    static void savedAndRestoredContinueAsOneRun(Guest g, int n, long seed, Program p, long until, long breakAt) throws Exception {
        Outcome whole;
        try (Rig r = rig(g, n, seed, p, breakAt)) {
            whole = finish(g, r, record(r.m()));
        }
        byte[] file;
        Outcome saving;
        int switchesBefore;
        try (Rig r = rig(g, n, seed, p, breakAt)) {
            List<String> log = record(r.m());
            StopReason s = r.m().run(until);
            if (breakAt != 0) {
                assertEquals(new StopReason.Breakpoint(breakAt, 1), s, "vCPU 1 reached its entry");
                assertEquals(1, r.m().cpu());
            } else {
                assertInstanceOf(StopReason.BudgetExhausted.class, s);
            }
            switchesBefore = log.size();
            assertTrue(switchesBefore >= 2, "saved after a few switches: " + log);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            MachineSnapshot.save(r.m(), ID, out);
            file = out.toByteArray();
            saving = finish(g, r, log);
        }
        assertEquals(whole, saving, "saving changes nothing in the saved machine");
        Outcome restored;
        try (Rig r = rig(g, n, Schedule.DEFAULT_SEED == seed ? 99 : Schedule.DEFAULT_SEED, p, breakAt)) {
            // another schedule and vCPU states before the restore: the snapshot's replace them
            MachineSnapshot.restore(r.m(), ID, new ByteArrayInputStream(file), "smp");
            assertEquals(seed, r.m().schedule().seed());
            if (breakAt != 0) assertEquals(breakAt, r.m().stoppedAtBreakpoint());
            List<String> log = record(r.m());
            restored = finish(g, r, log);
        }
        List<String> after = whole.switches().subList(switchesBefore, whole.switches().size());
        assertTrue(after.size() >= 2, "switches after the snapshot point: " + after.size());
        assertEquals(new Outcome(after, whole.counter(), whole.instructions(), whole.nanos(), whole.registers(), whole.states()), restored,
                g + " N=" + n + " seed " + seed + " " + p + ": the restored machine continues as the saved one");
    }

    @ParameterizedTest
    @EnumSource(Guest.class)
    void midQuantumSnapshotsContinueAsTheSavedMachine(Guest g) throws Exception {
        savedAndRestoredContinueAsOneRun(g, 2, Schedule.DEFAULT_SEED, Program.RACY, 2 * Schedule.DEFAULT_QUANTUM + 12_345, 0);
        savedAndRestoredContinueAsOneRun(g, 2, 7, Program.RACY, 31_234, 0);
        savedAndRestoredContinueAsOneRun(g, 4, 12345, Program.RACY, 50_001, 0);
        savedAndRestoredContinueAsOneRun(g, 4, Schedule.DEFAULT_SEED, Program.LOCKED, 2 * Schedule.DEFAULT_QUANTUM + 45_678, 0);
        savedAndRestoredContinueAsOneRun(g, 2, 42, Program.LOCKED, 20_003, 0);
    }

    /** The stop names vCPU 1, the current vCPU of both machines, and both step over the breakpoint alike. */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aSnapshotAtABreakpointAnotherVcpuReachedContinuesOnIt(Guest g) throws Exception {
        savedAndRestoredContinueAsOneRun(g, 2, Schedule.DEFAULT_SEED, Program.RACY, SmpScheduleTest.BUDGET, g.code(1));
        savedAndRestoredContinueAsOneRun(g, 4, 7, Program.LOCKED, SmpScheduleTest.BUDGET, g.code(1));
    }

    @ParameterizedTest
    @EnumSource(Guest.class)
    void aMachineOfAnotherCpuCountRefusesTheSnapshotInOneLine(Guest g) throws Exception {
        byte[] two, one;
        try (Rig r = rig(g, 2, 7, Program.RACY, 0)) {
            r.m().run(10_000);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            MachineSnapshot.save(r.m(), ID, out);
            two = out.toByteArray();
        }
        try (Rig r = rig(g, 1, Schedule.DEFAULT_SEED, Program.RACY, 0)) {
            r.m().run(10_000);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            MachineSnapshot.save(r.m(), ID, out);
            one = out.toByteArray();
        }
        assertEquals(MachineSnapshot.FORMAT, java.nio.ByteBuffer.wrap(one, MachineSnapshot.MAGIC.length(), 4).getInt(), "one vCPU: format 1, as always");
        assertEquals(MachineSnapshot.FORMAT_CPUS, java.nio.ByteBuffer.wrap(two, MachineSnapshot.MAGIC.length(), 4).getInt());
        for (int n : new int[] {1, 4}) {
            try (Rig r = rig(g, n, 7, Program.RACY, 0)) {
                SnapshotException e = assertThrows(SnapshotException.class,
                        () -> MachineSnapshot.restore(r.m(), ID, new ByteArrayInputStream(two), "two.snapshot"));
                assertEquals(SnapshotException.Kind.OTHER_MACHINE, e.kind());
                assertEquals("snapshot two.snapshot is of a machine with 2 CPUs, this one has " + n, e.getMessage());
            }
        }
        try (Rig r = rig(g, 2, 7, Program.RACY, 0)) {
            SnapshotException e = assertThrows(SnapshotException.class,
                    () -> MachineSnapshot.restore(r.m(), ID, new ByteArrayInputStream(one), "one.snapshot"));
            assertEquals("snapshot one.snapshot is of a machine with 1 CPU, this one has 2", e.getMessage());
        }
    }

    /** The schedule's own SplitMix64 draws what {@link SplittableRandom} drew for the same seed, so seeds keep their interleavings. */
    @Test
    void theScheduleGeneratorDrawsSplittableRandomsSequence() {
        for (long seed : new long[] {1, 7, 42, 12345, -1, Long.MIN_VALUE}) {
            SplittableRandom jdk = new SplittableRandom(seed);
            Schedule.Generator own = new Schedule.Generator(seed);
            SplittableRandom bounds = new SplittableRandom(seed ^ 0x5555);
            for (int i = 0; i < 20_000; i++) {
                int b = 1 + bounds.nextInt(i % 3 == 0 ? 8 : Integer.MAX_VALUE);
                long lb = 1 + bounds.nextLong(i % 5 == 0 ? 1L << 14 : Long.MAX_VALUE);
                assertEquals(jdk.nextInt(b), own.nextInt(b), "nextInt(" + b + ") #" + i + " of seed " + seed);
                assertEquals(jdk.nextLong(lb), own.nextLong(lb), "nextLong(" + lb + ") #" + i + " of seed " + seed);
            }
        }
        // and a position read, then set on a fresh schedule, continues the sequence
        Schedule s = Schedule.of(7);
        boolean[] all = {true, true, true};
        for (int i = 0; i < 100; i++) {
            s.next(all, -1);
            s.nextQuantum();
        }
        Schedule copy = Schedule.of(7).at(s.position());
        assertNotEquals(Schedule.of(7).position(), s.position());
        for (int i = 0; i < 100; i++) {
            assertEquals(s.next(all, -1), copy.next(all, -1));
            assertEquals(s.nextQuantum(), copy.nextQuantum());
        }
    }
}
