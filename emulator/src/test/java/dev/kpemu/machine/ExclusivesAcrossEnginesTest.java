package dev.kpemu.machine;

import static dev.kpemu.machine.SmpGuest.DATA;
import static dev.kpemu.machine.SmpGuest.SCRATCH;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * Atomics across engines (issue 26's SMP): arm64's exclusive monitor when a vCPU is switched out
 * between LDXR and STXR, and where a count-limited x86 run can stop. docs/smp-notes.md.
 */
class ExclusivesAcrossEnginesTest {
    private static final SmpGuest G = SmpGuest.ARM64;
    /** ldxr x1, [x9]; add x1, x1, #1; stxr w2, x1, [x9]; nop: 12 bytes run, w2 = 0 when the store succeeded. */
    private static final String LL_SC = "ldxr x1, [x9]\n add x1, x1, #1\n stxr w2, x1, [x9]\n nop";
    private static final long LL_SC_END = SCRATCH + 12;
    private static final long CLREX = SCRATCH + 0x100;

    /** The outcome of one interleaving: A's STXR status (0: stored) and the word at DATA. */
    private record Outcome(long status, long memory) {}

    /** What the host does to engine A while A is switched out, after its LDXR. */
    private interface AtSwitch { void apply(Unicorn a); }

    /**
     * A runs LDXR (count 1, so it stops right after it), then {@code atSwitch} acts on A, then B's
     * guest store of {@code bStores} (null: B does not run), then A resumes with ADD and STXR.
     * DATA holds 5 before.
     */
    private static Outcome interleave(AtSwitch atSwitch, Long bStores) {
        try (HostRam ram = HostRam.allocate(SmpGuest.RAM_SIZE)) {
            G.load(ram.segment());
            SmpGuest.put(ram.segment(), SCRATCH, G.asm(LL_SC, SCRATCH));
            SmpGuest.put(ram.segment(), CLREX, G.asm("clrex\n nop", CLREX));
            ram.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, DATA - SmpGuest.RAM, 5);
            try (Unicorn a = G.engine(ram); Unicorn b = G.engine(ram)) {
                a.regWrite(Arm64Reg.X9, DATA);
                a.regWrite(Arm64Reg.X2, 0xdead);
                a.start(SCRATCH, LL_SC_END, 0, 1);
                assertEquals(SCRATCH + 4, a.regRead(Arm64Reg.PC), "A stopped between LDXR and STXR");
                assertEquals(5, a.regRead(Arm64Reg.X1));
                long pc = a.regRead(Arm64Reg.PC);
                if (atSwitch != null) atSwitch.apply(a);
                if (bStores != null) G.guestStore(b, DATA, bStores);
                a.start(pc, LL_SC_END, 0, 100);
                assertEquals(LL_SC_END, a.regRead(Arm64Reg.PC));
                return new Outcome(a.regRead(Arm64Reg.X2) & 0xffff_ffffL, b.memReadLong(DATA));
            }
        }
    }

    /** The host runs one CLREX on A (count 1, at a stub address), as a switch would. */
    private static void runClrex(Unicorn a) {
        a.start(CLREX, CLREX + 4, 0, 1);
    }

    @Test
    void stxrSucceedsWhenNothingHappenedBetween() {
        assertEquals(new Outcome(0, 6), interleave(null, null), "resuming A keeps its monitor");
    }

    @Test
    void stxrFailsWhenTheOtherEngineStoredAnotherValue() {
        assertEquals(new Outcome(1, 7), interleave(null, 7L));
    }

    /**
     * Wrong for SMP: B stored to the monitored address, yet A's STXR succeeds, because QEMU's STXR
     * is a compare-and-swap against the value LDXR read (exclusive_val) and B stored that same
     * value. On a CPU any store by another observer clears the monitor.
     */
    @Test
    void stxrSucceedsWhenTheOtherEngineStoredTheSameValue() {
        assertEquals(new Outcome(0, 6), interleave(null, 5L));
    }

    /** Remedy 1: a CLREX run on A at the switch makes its STXR fail, whatever B stored. */
    @Test
    void clrexRunByTheHostClearsTheMonitor() {
        assertEquals(new Outcome(1, 5), interleave(ExclusivesAcrossEnginesTest::runClrex, 5L));
        assertEquals(new Outcome(1, 5), interleave(ExclusivesAcrossEnginesTest::runClrex, null));
    }

    /** A context saved after LDXR and restored keeps the monitor (the context holds it), so a plain restore is no remedy. */
    @Test
    void contextSaveAndRestoreKeepsTheMonitor() {
        assertEquals(new Outcome(0, 6), interleave(a -> {
            try (Unicorn.Context c = a.contextAlloc()) {
                a.contextSave(c);
                a.contextRestore(c);
            }
        }, 5L));
    }

    /** Writing PC (as a host exception entry would) or PSTATE does not clear the monitor. */
    @Test
    void registerWritesKeepTheMonitor() {
        assertEquals(new Outcome(0, 6), interleave(a -> {
            a.regWrite(Arm64Reg.PC, a.regRead(Arm64Reg.PC));
            a.regWrite(Arm64Reg.PSTATE, a.regRead(Arm64Reg.PSTATE));
        }, 5L));
    }

    /**
     * Remedy 2, no guest code run: the monitor's address is a word of the saved context
     * (QEMU's {@code exclusive_addr}; -1 = open). Its offset is found by calibration (the same
     * engine state saved after LDXR of DATA and after CLREX: the one word that is DATA in the first
     * and -1 in the second); writing -1 there and restoring makes A's STXR fail.
     */
    @Test
    void contextWordPatchClearsTheMonitor() {
        long offset = exclusiveAddressOffset();
        assertEquals(new Outcome(1, 5), interleave(a -> clearByContext(a, offset), 5L));
        assertEquals(new Outcome(1, 5), interleave(a -> clearByContext(a, offset), null));
    }

    static void clearByContext(Unicorn a, long offset) {
        try (Unicorn.Context c = a.contextAlloc()) {
            a.contextSave(c);
            c.blob().set(ValueLayout.JAVA_LONG_UNALIGNED, offset, -1L);
            a.contextRestore(c);
        }
    }

    /** The offset in an arm64 context blob of the exclusive monitor's address, by calibration. */
    static long exclusiveAddressOffset() {
        try (HostRam ram = HostRam.allocate(SmpGuest.RAM_SIZE)) {
            G.load(ram.segment());
            SmpGuest.put(ram.segment(), SCRATCH, G.asm(LL_SC, SCRATCH));
            SmpGuest.put(ram.segment(), CLREX, G.asm("clrex\n nop", CLREX));
            try (Unicorn a = G.engine(ram); Unicorn.Context held = a.contextAlloc(); Unicorn.Context open = a.contextAlloc()) {
                a.regWrite(Arm64Reg.X9, DATA);
                a.start(SCRATCH, LL_SC_END, 0, 1);
                long pc = a.regRead(Arm64Reg.PC);
                a.contextSave(held);
                runClrex(a);
                a.regWrite(Arm64Reg.PC, pc);
                a.contextSave(open);
                MemorySegment h = held.blob(), o = open.blob();
                List<Long> found = new ArrayList<>();
                for (long off = 0; off + 8 <= h.byteSize(); off += 8) {
                    if (h.get(ValueLayout.JAVA_LONG_UNALIGNED, off) == DATA && o.get(ValueLayout.JAVA_LONG_UNALIGNED, off) == -1L) found.add(off);
                }
                assertEquals(1, found.size(), "one word is DATA after LDXR and -1 after CLREX: " + found);
                return found.get(0);
            }
        }
    }

    /**
     * x86: {@code lock cmpxchg} is one instruction, and a run limited to one instruction runs it
     * whole (compare, store, flags); a count never stops inside an instruction.
     */
    @Test
    void x86CountedRunDoesNotStopInsideLockCmpxchg() {
        SmpGuest g = SmpGuest.X86;
        try (HostRam ram = HostRam.allocate(SmpGuest.RAM_SIZE)) {
            g.load(ram.segment());
            byte[] code = g.asm("lock cmpxchg %r10, (%r9)\n nop", SCRATCH);
            SmpGuest.put(ram.segment(), SCRATCH, code);
            ram.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, DATA - SmpGuest.RAM, 5);
            try (Unicorn a = g.engine(ram)) {
                a.regWrite(X86Reg.R9, DATA);
                a.regWrite(X86Reg.RAX, 5);
                a.regWrite(X86Reg.R10, 9);
                a.start(SCRATCH, SmpGuest.NEVER, 0, 1);
                assertEquals(SCRATCH + code.length - 1, a.regRead(X86Reg.RIP));
                assertEquals(9, a.memReadLong(DATA));
                assertTrue((a.regRead(X86Reg.EFLAGS) & 0x40) != 0, "ZF: exchanged");
            }
        }
    }

    /**
     * x86: a {@code rep} string instruction is counted once per iteration by Unicorn's count (QEMU
     * translates each iteration as a jump back to the instruction), so a counted run can stop
     * between iterations: RIP at the instruction, RCX the iterations left — an architectural
     * interruption point (as an interrupt between iterations), not a torn instruction.
     */
    @Test
    void x86CountedRunStopsBetweenRepIterations() {
        SmpGuest g = SmpGuest.X86;
        try (HostRam ram = HostRam.allocate(SmpGuest.RAM_SIZE)) {
            g.load(ram.segment());
            byte[] code = g.asm("rep stosb\n nop", SCRATCH);
            SmpGuest.put(ram.segment(), SCRATCH, code);
            try (Unicorn a = g.engine(ram)) {
                a.regWrite(X86Reg.RDI, DATA);
                a.regWrite(X86Reg.RCX, 100);
                a.regWrite(X86Reg.RAX, 0xab);
                a.start(SCRATCH, SmpGuest.NEVER, 0, 10);
                assertEquals(REP_RIP_AFTER_10, a.regRead(X86Reg.RIP) - SCRATCH);
                assertEquals(REP_RCX_AFTER_10, a.regRead(X86Reg.RCX));
                assertEquals(DATA + 100 - REP_RCX_AFTER_10, a.regRead(X86Reg.RDI));
            }
        }
    }

    /**
     * The same with kpemu's instruction clock (a block hook in C, no count): each iteration of
     * {@code rep stosb} is a block run, so a slice of 10 instructions also ends between iterations,
     * with the clock charged exactly the 10 iterations.
     */
    @Test
    void x86ClockSliceEndsBetweenRepIterations() {
        SmpGuest g = SmpGuest.X86;
        try (HostRam ram = HostRam.allocate(SmpGuest.RAM_SIZE)) {
            g.load(ram.segment());
            byte[] code = g.asm("rep stosb\n nop", SCRATCH);
            SmpGuest.put(ram.segment(), SCRATCH, code);
            Unicorn a = g.engine(ram);
            InstructionClock clock = new InstructionClock(a, false);
            try {   // the engine closes before the clock whose state its hook reads
                a.regWrite(X86Reg.RDI, DATA);
                a.regWrite(X86Reg.RCX, 100);
                a.regWrite(X86Reg.RAX, 0xab);
                clock.arm(10);
                a.start(SCRATCH, SmpGuest.NEVER, 0, 0);
                assertTrue(clock.reachedDeadline());
                assertEquals(10, clock.executed());
                assertEquals(SCRATCH, a.regRead(X86Reg.RIP));
                assertEquals(90, a.regRead(X86Reg.RCX));
            } finally {
                a.close();
                clock.close();
            }
        }
    }

    /** Measured: after a count of 10 from the rep's start, RIP (relative) and RCX. */
    static final long REP_RIP_AFTER_10 = 0, REP_RCX_AFTER_10 = 90;
}
