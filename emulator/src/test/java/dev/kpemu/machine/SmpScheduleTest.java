package dev.kpemu.machine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.board.Arm64Board;
import dev.kpemu.machine.board.X86Pc;
import dev.kpemu.machine.x86.X86LongMode;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.X86Reg;

/**
 * A machine with several vCPUs run in turn on one thread (issue 26, docs/smp-notes.md step 2):
 * bare metal on each arch's board, each vCPU with its own program (x86: long mode, identity-mapped;
 * arm64: MMU off), shared data. Locked increments from N vCPUs sum exactly; a seed names one
 * interleaving; a host breakpoint reports the vCPU that reached it; a spin wait ends its quantum when another vCPU can run; a halted vCPU is skipped until
 * an interrupt wakes it; arm64's exclusive monitor is cleared at every switch.
 */
class SmpScheduleTest {
    static final long BUDGET = 200_000_000;

    enum Guest {
        X86 {
            @Override long code(int cpu) { return 0x10_0000 + 0x1_0000L * cpu; }
            @Override long data() { return 0x20_0000; }
            @Override String lockedIncrement(int k) {
                return "mov $" + k + ", %ecx\n"
                        + "outer:\n mov $1, %eax\n"
                        + "spin:\n xchg %eax, " + lock() + "\n test %eax, %eax\n jz got\n pause\n mov $1, %eax\n jmp spin\n"
                        + "got:\n mov " + counter() + ", %rdx\n jmp 1f\n"
                        + "1:\n add $1, %rdx\n mov %rdx, " + counter() + "\n movl $0, " + lock() + "\n loop outer\n cli\n hlt\n";
            }
            @Override String racyIncrement(int k) {
                return "mov $" + k + ", %ecx\n"
                        + "outer:\n mov " + counter() + ", %rdx\n jmp 1f\n"
                        + "1:\n add $1, %rdx\n mov %rdx, " + counter() + "\n loop outer\n cli\n hlt\n";
            }
            @Override String idleForever() { return "cli\n hlt\n"; }
            @Override String setReg(int value) { return "mov $" + value + ", %rbx\n"; }
            @Override int reg() { return X86Reg.RBX; }
            @Override int counterReg() { return X86Reg.R13; }
            @Override String call(long f) { return "movabs $" + f + ", %rax\n call *%rax\n"; }
            @Override String function() { return "add $1, %r13\n ret\n"; }
            @Override String store1(long address) { return "movq $1, " + address + "\n"; }
            @Override String waitFor(long address) { return "8:\n cmpq $0, " + address + "\n je 8b\n"; }
            @Override String burn(int n) { return "mov $" + n + ", %ecx\n 7: loop 7b\n"; }
            @Override String ringDoorbell(int cpu) { return "mov $" + cpu + ", %eax\n mov $" + DOORBELL_PORT + ", %dx\n out %eax, %dx\n"; }
            /** Waits with IF set; the interrupt's handler stores 1 at {@code marker}, then the vCPU stops for good. */
            @Override String sleepThenMark(long marker) {
                return X86_GATE + "gate " + VECTOR + ", handler\n lidt idtr(%rip)\n sti\n hlt\n cli\n hlt\n"
                        + "handler:\n movq $1, " + marker + "\n iretq\n"
                        + "idtr: .word 0xfff\n .quad 0x6000\n";
            }
            @Override int vector() { return VECTOR; }
            @Override byte[] asm(String src, long at) { return Asm.x86(src, at); }

            @Override Rig rig(int cpus, java.util.function.Consumer<Machine> beforeCpus) {
                X86Pc pc = new X86Pc(16L << 20, java.io.OutputStream.nullOutputStream(), false);
                Machine m = pc.machine();
                try {
                    var mem = m.memory();
                    X86LongMode.identityMap(mem, 0x1000, 16 << 20);
                    int limit = X86LongMode.writeGdt(mem, 0x5000);
                    beforeCpus.accept(m);
                    for (int i = 0; i < cpus; i++) {
                        int cpu = i == 0 ? 0 : m.addCpu();
                        assertEquals(i, cpu);
                        X86LongMode.enter(m.engine(cpu), 0x5000, limit, 0x1000);
                        m.engine(cpu).regWrite(X86Reg.RSP, 0x8_0000 + 0x2000L * cpu);
                    }
                    Doorbell bell = new Doorbell(m, this);
                    m.bus().attachPorts(DOORBELL_PORT, 2, bell);
                    return new Rig(this, m, pc, bell);
                } catch (RuntimeException e) {
                    pc.close();
                    throw e;
                }
            }
        },
        ARM64 {
            @Override long code(int cpu) { return Arm64Layout.RAM_BASE + 0x10_0000 + 0x1_0000L * cpu; }
            @Override long data() { return Arm64Layout.RAM_BASE + 0x20_0000; }
            @Override String lockedIncrement(int k) {
                return imm("x9", lock()) + imm("x10", counter()) + "mov x3, #" + k + "\n mov w1, #1\n"
                        + "outer:\n"
                        + "spin:\n ldaxr w2, [x9]\n cbnz w2, spin\n stxr w4, w1, [x9]\n cbnz w4, spin\n"
                        + " ldr x5, [x10]\n b mid\n"
                        + "mid:\n add x5, x5, #1\n str x5, [x10]\n stlr wzr, [x9]\n subs x3, x3, #1\n b.ne outer\n"
                        + idleForever();
            }
            @Override String racyIncrement(int k) {
                return imm("x10", counter()) + "mov x3, #" + k + "\n"
                        + "outer:\n ldr x5, [x10]\n b mid\n"
                        + "mid:\n add x5, x5, #1\n str x5, [x10]\n subs x3, x3, #1\n b.ne outer\n"
                        + idleForever();
            }
            @Override String idleForever() { return "idle_loop:\n wfi\n b idle_loop\n"; }
            @Override String setReg(int value) { return "mov x19, #" + value + "\n"; }
            @Override int reg() { return Arm64Reg.X19; }
            @Override int counterReg() { return Arm64Reg.X20; }
            @Override String call(long f) { return imm("x8", f) + "blr x8\n"; }
            @Override String function() { return "add x20, x20, #1\n ret\n"; }
            @Override String store1(long address) { return imm("x11", address) + "mov x12, #1\n str x12, [x11]\n"; }
            @Override String waitFor(long address) { return imm("x11", address) + "wait_loop:\n ldr x12, [x11]\n cbz x12, wait_loop\n"; }
            @Override String burn(int n) { return imm("x13", n) + "burn_loop:\n subs x13, x13, #1\n b.ne burn_loop\n"; }
            @Override String ringDoorbell(int cpu) { return imm("x14", DOORBELL_MMIO) + "mov w15, #" + cpu + "\n str w15, [x14]\n"; }
            /** Waits in WFI with interrupts masked (WFI ends on a pending one), stores 1 at {@code marker}, lowers the line. */
            @Override String sleepThenMark(long marker) {
                return "wfi\n" + store1(marker) + imm("x14", DOORBELL_MMIO + 8) + "mov w15, #1\n str w15, [x14]\n" + idleForever();
            }
            @Override int vector() { return 5; }
            @Override byte[] asm(String src, long at) { return Asm.arm64(src, at); }

            @Override Rig rig(int cpus, java.util.function.Consumer<Machine> beforeCpus) {
                Arm64Board board = Arm64Board.create(16L << 20, b -> {});
                Machine m = board.machine();
                try {
                    beforeCpus.accept(m);
                    for (int i = 1; i < cpus; i++) assertEquals(i, m.addCpu());
                    Doorbell bell = new Doorbell(m, this);
                    m.bus().attach(DOORBELL_MMIO, bell);
                    return new Rig(this, m, board, bell);
                } catch (RuntimeException e) {
                    board.close();
                    throw e;
                }
            }
        };

        static final int DOORBELL_PORT = 0x510, VECTOR = 0x41;
        static final long DOORBELL_MMIO = 0x0a00_0000L;
        static final String X86_GATE = """
                .macro gate vec, handler
                  lea \\handler(%rip), %rax
                  mov %ax, 0x6000+\\vec*16
                  movw $0x10, 0x6000+\\vec*16+2
                  movw $0x8e00, 0x6000+\\vec*16+4
                  shr $16, %rax
                  mov %ax, 0x6000+\\vec*16+6
                  shr $16, %rax
                  mov %eax, 0x6000+\\vec*16+8
                  movl $0, 0x6000+\\vec*16+12
                .endm
                """;

        long counter() { return data(); }
        long lock() { return data() + 0x40; }
        long marker() { return data() + 0x80; }
        long flag() { return data() + 0xc0; }
        long functionAddress() { return data() + 0x1000; }

        abstract long code(int cpu);
        abstract long data();
        /** K increments of the counter, each under a spinlock (a load, a branch, an add, a store inside), then idle for good. */
        abstract String lockedIncrement(int k);
        /** K increments of the counter without a lock (a block boundary between the load and the store), then idle for good. */
        abstract String racyIncrement(int k);
        abstract String idleForever();
        abstract String setReg(int value);
        abstract int reg();
        abstract int counterReg();
        abstract String call(long f);
        abstract String function();
        abstract String store1(long address);
        abstract String waitFor(long address);
        abstract String burn(int n);
        abstract String ringDoorbell(int cpu);
        abstract String sleepThenMark(long marker);
        abstract int vector();
        abstract byte[] asm(String src, long at);
        abstract Rig rig(int cpus, java.util.function.Consumer<Machine> beforeCpus);

        Rig rig(int cpus) { return rig(cpus, m -> {}); }

        static String imm(String reg, long v) {
            return "movz " + reg + ", #" + (v & 0xffff) + "\n movk " + reg + ", #" + ((v >>> 16) & 0xffff) + ", lsl #16\n";
        }
    }

    /**
     * A doorbell: a write of {@code cpu} to its first register (x86 port, arm64 MMIO offset 0) raises
     * that vCPU's interrupt line (latch), to the second lowers it; each ring is logged.
     */
    static final class Doorbell implements Device.Mmio, Device.PortIo {
        final Machine m;
        final Guest g;
        final List<String> log;

        Doorbell(Machine m, Guest g) {
            this.m = m;
            this.g = g;
            this.log = new ArrayList<>();
        }

        @Override public String name() { return "doorbell"; }
        @Override public long mmioSize() { return 0x1000; }
        @Override public long read(long offset, int size) { return 0; }
        @Override public void write(long offset, int size, long value) {
            if (offset == 0 || offset == 8) ring(offset == 8, (int) value);      // (a wide store may come in halves)
        }
        @Override public int in(int port, int size) { return 0; }
        @Override public void out(int port, int size, int value) { ring(port != Guest.DOORBELL_PORT, value); }

        private void ring(boolean lower, int cpu) {
            log.add((lower ? "lower " : "ring ") + cpu + " by " + m.cpu());
            m.setInterruptLine(cpu, g.vector(), !lower);
        }
    }

    /** A board with its vCPUs; {@link #load} puts a program at a vCPU's code address and starts it there. */
    record Rig(Guest g, Machine m, AutoCloseable board, Doorbell bell) implements AutoCloseable {
        void load(int cpu, String src) {
            long at = g.code(cpu);
            m.memory().write(at, g.asm(src, at));
            if (cpu == 0) m.setPc(at);
            else m.startCpu(cpu, at);
        }

        /** Records (vCPU, PC) at every switch, and the doorbell's rings in the same list. */
        List<String> recordSwitches() {
            List<String> log = new ArrayList<>();
            m.setSwitchObserver((cpu, pc, quantum) -> log.add(cpu + "@" + Long.toHexString(pc)));
            return log;
        }

        long counter() { return m.memory().readLong(g.counter()); }

        @Override public void close() throws Exception { board.close(); }
    }

    // ------------------------------------------------------------------ (1) locked increments sum exactly

    @ParameterizedTest
    @EnumSource(Guest.class)
    void lockedIncrementsFromTwoAndFourCpusSumExactly(Guest g) throws Exception {
        int k = 3_000;
        for (int n : new int[] {2, 4}) {
            for (long seed : new long[] {Schedule.DEFAULT_SEED, 1, 42}) {
                try (Rig r = g.rig(n)) {
                    r.m.setSchedule(Schedule.of(seed));
                    for (int cpu = 0; cpu < n; cpu++) r.load(cpu, g.lockedIncrement(k));
                    StopReason s = r.m.run(BUDGET);
                    assertInstanceOf(StopReason.Halted.class, s, s.toString());
                    assertEquals((long) n * k, r.counter(), n + " vCPUs, seed " + seed);
                    assertEquals(0, r.m.memory().readLong(g.lock()) & 0xffff_ffffL, "the lock is free");
                    for (int cpu = 0; cpu < n; cpu++) assertEquals(Machine.CpuState.HALTED, r.m.cpuState(cpu));
                    assertTrue(r.m.cpuSwitches() >= n, "every vCPU ran: " + r.m.cpuSwitches());
                }
            }
        }
    }

    /**
     * A write watch on the counter (issue 28) sees every vCPU's stores, each with its vCPU, whether
     * added before the vCPUs joined ({@code Watchpoints.join}) or after; the lock beside it on the
     * same page is stored to as often and never reported.
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aWriteWatchSeesEveryCpusStoresWithItsCpu(Guest g) throws Exception {
        int k = 500, n = 3;
        for (boolean before : new boolean[] {true, false}) {
            List<WatchHit> hits = new ArrayList<>();
            try (Rig r = g.rig(n, m -> {
                if (before) m.watchpoints().add(g.counter(), 8, false, true, hits::add);
            })) {
                if (!before) r.m.watchpoints().add(g.counter(), 8, false, true, hits::add);
                r.m.setSchedule(Schedule.of(42));
                for (int cpu = 0; cpu < n; cpu++) r.load(cpu, g.lockedIncrement(k));
                StopReason s = r.m.run(BUDGET);
                assertInstanceOf(StopReason.Halted.class, s, s.toString());
                assertEquals((long) n * k, r.counter());
                assertEquals(n * k, hits.size(), "one store per increment, added " + (before ? "before" : "after") + " the vCPUs");
                int[] perCpu = new int[n];
                for (int i = 0; i < hits.size(); i++) {
                    WatchHit h = hits.get(i);
                    perCpu[h.cpu()]++;
                    assertEquals(g.counter(), h.physicalAddress());
                    assertEquals(i, h.oldValue());
                    assertEquals(i + 1, h.newValue());
                }
                assertArrayEquals(new int[] {k, k, k}, perCpu);
            }
        }
    }

    /** The racy program loses increments: the locked test's exact sum is not the program's doing alone. */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void unlockedIncrementsLoseUpdates(Guest g) throws Exception {
        int k = 3_000;
        try (Rig r = g.rig(4)) {
            r.m.setSchedule(Schedule.of(1));
            for (int cpu = 0; cpu < 4; cpu++) r.load(cpu, g.racyIncrement(k));
            assertInstanceOf(StopReason.Halted.class, r.m.run(BUDGET));
            assertTrue(r.counter() < 4L * k, "lost updates: " + r.counter());
        }
    }

    // ------------------------------------------------------------------ (2) a seed names one interleaving

    /** What one run of the racy program shows: the switches, the counter, the guest time, each vCPU's result registers. */
    record Outcome(List<String> switches, long counter, long instructions, List<Long> registers) {}

    static Outcome racyRun(Guest g, int n, long seed, long budgetPerRun) throws Exception {
        try (Rig r = g.rig(n)) {
            r.m.setSchedule(Schedule.of(seed));
            List<String> log = r.recordSwitches();
            for (int cpu = 0; cpu < n; cpu++) r.load(cpu, g.racyIncrement(5_000));
            StopReason s;
            do {
                s = r.m.run(budgetPerRun);                  // in chunks: the schedule carries over
            } while (s instanceof StopReason.BudgetExhausted);
            assertInstanceOf(StopReason.Halted.class, s, s.toString());
            List<Long> regs = new ArrayList<>();
            for (int cpu = 0; cpu < n; cpu++) {
                regs.add(r.m.engine(cpu).regRead(g == Guest.X86 ? X86Reg.RDX : Arm64Reg.X5));
                regs.add(r.m.engine(cpu).regRead(g == Guest.X86 ? X86Reg.RIP : Arm64Reg.PC));
            }
            return new Outcome(log, r.counter(), r.m.clock().instructions(), regs);
        }
    }

    @ParameterizedTest
    @EnumSource(Guest.class)
    void aSeedRepeatsItsInterleavingAndAnotherSeedChangesIt(Guest g) throws Exception {
        Outcome a = racyRun(g, 4, 7, BUDGET), again = racyRun(g, 4, 7, 12_345);
        assertEquals(a, again, "seed 7 twice (one run, and runs of 12,345 instructions)");
        Outcome b = racyRun(g, 4, 8, BUDGET), bAgain = racyRun(g, 4, 8, BUDGET);
        assertEquals(b, bAgain, "seed 8 twice");
        assertNotEquals(a.switches(), b.switches(), "seeds 7 and 8 interleave differently");
        assertTrue(a.switches().size() > 20, "a seeded schedule switches often: " + a.switches().size());
        assertNotEquals(a.counter(), b.counter(), "and lose different increments: " + a.counter() + " / " + b.counter());
    }

    /** The default seed: round-robin in index order, quanta of {@link Schedule#DEFAULT_QUANTUM}. */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void theDefaultScheduleIsARoundRobin(Guest g) throws Exception {
        try (Rig r = g.rig(3)) {
            List<String> order = new ArrayList<>();
            List<Long> quanta = new ArrayList<>();
            r.m.setSwitchObserver((cpu, pc, quantum) -> {
                order.add(String.valueOf(cpu));
                quanta.add(quantum);
            });
            for (int cpu = 0; cpu < 3; cpu++) r.load(cpu, g.racyIncrement(60_000));
            long start = r.m.clock().instructions();
            assertInstanceOf(StopReason.BudgetExhausted.class, r.m.run(6 * Schedule.DEFAULT_QUANTUM));
            assertEquals(List.of("0", "1", "2", "0", "1", "2"), order);
            for (long q : quanta) assertEquals(Schedule.DEFAULT_QUANTUM, q);
            long ran = r.m.clock().instructions() - start;
            assertTrue(ran >= 6 * Schedule.DEFAULT_QUANTUM && ran < 6 * Schedule.DEFAULT_QUANTUM + 8,
                    "guest time: every vCPU's instructions (the budget ends with a whole block): " + ran);
            assertEquals(2, r.m.cpu(), "the current vCPU is the one that ran last");
        }
    }

    // ------------------------------------------------------------------ (3) breakpoints on every vCPU

    /**
     * A host breakpoint set before the vCPUs were added, on a function vCPU 1 calls first and vCPU 0
     * after it: each arrival stops the run with the vCPU that reached it current, its registers in
     * the machine's views.
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aBreakpointReportsTheVcpuThatReachedItAndItsRegisters(Guest g) throws Exception {
        long f = g.functionAddress();
        try (Rig r = g.rig(2, m -> m.addBreakpoint(f))) {
            r.m.memory().write(f, g.asm(g.function(), f));
            r.load(0, g.setReg(0xa0) + g.waitFor(g.flag()) + g.call(f) + g.idleForever());
            r.load(1, g.setReg(0xb1) + g.call(f) + g.store1(g.flag()) + g.idleForever());
            StopReason s = r.m.run(BUDGET);
            assertEquals(new StopReason.Breakpoint(f, 1), s);
            assertEquals(1, r.m.cpu());
            assertSame(r.m.engine(1), r.m.engine());
            assertEquals(f, r.m.pc());
            assertEquals(0xb1, r.m.engine().regRead(g.reg()), "vCPU 1's register");
            assertEquals(0, r.m.engine().regRead(g.counterReg()), "f has not run");
            s = r.m.run(BUDGET);
            assertEquals(new StopReason.Breakpoint(f, 0), s, "the same breakpoint holds on vCPU 0");
            assertEquals(0, r.m.cpu());
            assertEquals(f, r.m.pc());
            assertEquals(0xa0, r.m.engine().regRead(g.reg()), "vCPU 0's register");
            assertInstanceOf(StopReason.Halted.class, r.m.run(BUDGET));
            assertEquals(1, r.m.engine(0).regRead(g.counterReg()), "f ran once on vCPU 0");
            assertEquals(1, r.m.engine(1).regRead(g.counterReg()), "and once on vCPU 1");
        }
    }

    /**
     * The text guard holds on every vCPU, whether it was made before the vCPUs were added or after:
     * vCPU 1 rewrites a guarded function (a guest store) and calls it; the new block's translation
     * on vCPU 1's engine stops the slice, the guard's owner hears of the write with vCPU 1 current,
     * and the new code runs.
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void theTextGuardHoldsOnEveryVcpu(Guest g) throws Exception {
        for (boolean guardFirst : new boolean[] {true, false}) {
            long f = g.functionAddress();
            try (Rig r = g.rig(2, m -> { if (guardFirst) m.textGuard(); })) {
                byte[] old = g.asm(g.function(), f);
                r.m.memory().write(f, old);
                List<String> heard = new ArrayList<>();
                r.m.textGuard().add(f, f, old.length, (id, va, pa, was, now) -> heard.add("vCPU " + r.m.cpu() + " wrote " + Long.toHexString(va)));
                String rewrite;
                if (g == Guest.X86) {
                    rewrite = "movb $2, " + (f + 3) + "\n";                       // add $1, %r13 -> add $2, %r13
                } else {
                    int word = java.nio.ByteBuffer.wrap(g.asm("add x20, x20, #2", f)).order(java.nio.ByteOrder.LITTLE_ENDIAN).getInt();
                    rewrite = Guest.imm("x11", f) + "movz w12, #" + (word & 0xffff) + "\n movk w12, #" + (word >>> 16) + ", lsl #16\n str w12, [x11]\n";
                }
                r.load(0, g.idleForever());
                r.load(1, rewrite + g.call(f) + g.idleForever());
                assertInstanceOf(StopReason.Halted.class, r.m.run(BUDGET));
                assertEquals(List.of("vCPU 1 wrote " + Long.toHexString(f)), heard, "guard made " + (guardFirst ? "before" : "after") + " vCPU 1");
                assertEquals(2, r.m.engine(1).regRead(g.counterReg()), "the new code ran");
            }
        }
    }

    // ------------------------------------------------------------------ (4) halted vCPUs

    /**
     * vCPU 1 halts at once (x86 HLT with IF set, arm64 WFI); vCPU 0 runs five quanta, then rings
     * vCPU 1's doorbell (its interrupt line) and waits for vCPU 1's mark. vCPU 1 is not scheduled
     * between its halt and the ring, and runs after it.
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aHaltedVcpuIsSkippedUntilAnInterruptWakesIt(Guest g) throws Exception {
        try (Rig r = g.rig(2)) {
            List<String> log = r.recordSwitches();
            List<String> bell = r.bell.log;
            r.m.setSwitchObserver((cpu, pc, q) -> log.add(cpu + (bell.isEmpty() ? " before" : " after") + " the ring"));
            r.load(0, g.burn(500_000) + g.ringDoorbell(1) + g.waitFor(g.marker()) + g.idleForever());
            r.load(1, g.sleepThenMark(g.marker()));
            StopReason s = r.m.run(BUDGET);
            assertInstanceOf(StopReason.Halted.class, s, s.toString());
            assertEquals(1, r.m.memory().readLong(g.marker()), "vCPU 1 woke and marked");
            assertEquals("ring 1 by 0", bell.get(0));
            assertEquals(List.of("0 before the ring", "1 before the ring", "0 before the ring", "1 after the ring"), log.subList(0, 4),
                    "vCPU 1 ran once, halted, and ran again only after the ring: " + log);
            assertTrue(r.m.clock().instructions() > 500_000);
            assertEquals(0, r.m.clock().idleNanos(), "vCPU 0 always had work: no idle time");
        }
    }

    /** Both vCPUs halt; a clock event raises vCPU 1's line: the clock idles to it and vCPU 1 wakes. */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void whenEveryVcpuIsHaltedTheClockIdlesToTheEventThatWakesOne(Guest g) throws Exception {
        try (Rig r = g.rig(2)) {
            long due = 1_000_000;
            r.m.clock().schedule(due, now -> r.m.setInterruptLine(1, g.vector(), true));
            r.load(0, g.idleForever());
            r.load(1, g.sleepThenMark(g.marker()));
            StopReason s = r.m.run(BUDGET);
            assertInstanceOf(StopReason.Halted.class, s, s.toString());
            assertEquals(1, r.m.memory().readLong(g.marker()), "vCPU 1 woke at the event");
            assertTrue(r.m.clock().nanos() >= due, "guest time reached the event: " + r.m.clock().nanos());
            assertTrue(r.m.clock().idleNanos() > 0, "by idling");
            assertTrue(r.m.clock().instructions() < 1_000, "few instructions ran: " + r.m.clock().instructions());
        }
    }

    /** A vCPU never started is never run; {@link Machine#startCpu} lets it run. */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aStoppedVcpuWaitsForItsStart(Guest g) throws Exception {
        try (Rig r = g.rig(2)) {
            r.load(0, g.idleForever());
            long at = g.code(1);
            r.m.memory().write(at, g.asm(g.store1(g.marker()) + g.idleForever(), at));
            assertEquals(Machine.CpuState.STOPPED, r.m.cpuState(1));
            assertInstanceOf(StopReason.Halted.class, r.m.run(BUDGET));
            assertEquals(0, r.m.memory().readLong(g.marker()));
            r.m.startCpu(1, at);
            assertInstanceOf(StopReason.Halted.class, r.m.run(BUDGET));
            assertEquals(1, r.m.memory().readLong(g.marker()));
        }
    }

    // ------------------------------------------------------------------ (5) spin waits end the quantum

    /** A spin-wait loop on {@code address} with the arch's spin hint first (x86 {@code pause}, arm64 {@code wfe}), as Linux's. */
    static String spinUntil(Guest g, long address) {
        return g == Guest.X86
                ? "spin_wait:\n pause\n cmpq $0, " + address + "\n je spin_wait\n"
                : Guest.imm("x11", address) + "spin_wait:\n wfe\n ldr x12, [x11]\n cbz x12, spin_wait\n";
    }

    /** Where {@link #spinUntil}'s hint, the head of its loop, is in vCPU {@code cpu}'s program that starts with it. */
    static long spinHint(Guest g, int cpu) {
        return g == Guest.X86 ? g.code(cpu) : g.code(cpu) + g.asm(Guest.imm("x11", 0), g.code(cpu)).length;
    }

    /**
     * vCPU 0 spins on a flag that vCPU 1 sets after some work, as a lock's waiter and its holder do.
     * A host breakpoint at the spin hint whose action is {@link Machine#yieldQuantum} (what a
     * booted Linux gets at every such site with several vCPUs) ends vCPU 0's quantum at its first
     * spin: vCPU 1 runs at once, and the run costs about a quantum less than without it, where
     * vCPU 0 spins its whole first quantum out. The same run twice is the same (switches and
     * instruction count): the yield depends only on the vCPUs' states.
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aSpinWaitEndsItsQuantumWhenAnotherVcpuCanRun(Guest g) throws Exception {
        long[] instructions = new long[3];
        List<List<String>> logs = new ArrayList<>();
        for (int run = 0; run < 3; run++) {
            boolean yielding = run < 2;
            try (Rig r = g.rig(2)) {
                List<String> log = r.recordSwitches();
                r.load(0, spinUntil(g, g.flag()) + g.store1(g.marker()) + g.idleForever());
                r.load(1, g.burn(20_000) + g.store1(g.flag()) + g.idleForever());
                if (yielding) r.m.addBreakpoints(new long[] {spinHint(g, 0)}, (m, pc) -> { m.yieldQuantum(); return true; });
                assertInstanceOf(StopReason.Halted.class, r.m.run(BUDGET));
                assertEquals(1, r.m.memory().readLong(g.marker()), "vCPU 0 saw the flag");
                assertEquals(yielding ? 1 : 0, r.m.quantumYields(), "one yield, at the first spin");
                instructions[run] = r.m.clock().instructions();
                if (yielding) logs.add(log);
                if (yielding) assertEquals(List.of("0@" + Long.toHexString(g.code(0)), "1@" + Long.toHexString(g.code(1))), log.subList(0, 2));
            }
        }
        assertEquals(instructions[0], instructions[1], "the same run twice");
        assertEquals(logs.get(0), logs.get(1), "the same switches twice");
        assertTrue(instructions[2] - instructions[0] > Schedule.DEFAULT_QUANTUM / 2,
                "without the yield vCPU 0 spins out its quantum: " + instructions[2] + " vs " + instructions[0]);
    }

    /**
     * When no other vCPU can run (vCPU 1 halted for good), {@link Machine#yieldQuantum} changes
     * nothing: vCPU 0 spins on, its quantum goes on, no yield is counted (a spin then waits for an
     * interrupt or a device, which only the clock brings).
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void aSpinWaitKeepsItsQuantumWhenNoOtherVcpuCanRun(Guest g) throws Exception {
        try (Rig r = g.rig(2)) {
            r.m.clock().schedule(100_000, now -> r.m.memory().writeLong(g.flag(), 1));
            r.load(0, spinUntil(g, g.flag()) + g.store1(g.marker()) + g.idleForever());
            r.load(1, g.idleForever());
            List<Boolean> answers = new ArrayList<>();
            r.m.addBreakpoints(new long[] {spinHint(g, 0)}, (m, pc) -> answers.add(m.yieldQuantum()));
            assertInstanceOf(StopReason.Halted.class, r.m.run(BUDGET));
            assertEquals(1, r.m.memory().readLong(g.marker()), "vCPU 0 saw the flag the clock event set");
            assertTrue(answers.size() > 100, "vCPU 0 spun on: " + answers.size());
            assertEquals(true, answers.get(0), "the first spin yielded: vCPU 1 had not run yet");
            assertEquals(List.of(false), answers.subList(1, answers.size()).stream().distinct().toList(), "no later one: vCPU 1 had halted");
            assertEquals(1, r.m.quantumYields());
        }
    }

    // ------------------------------------------------------------------ arm64's exclusive monitor

    /**
     * Quanta of 3 instructions: each vCPU's set-up block (4 instructions) is a quantum, then vCPU 0's
     * LDXR, ADD and branch (3), then vCPU 1's store of the value LDXR read and its WFI, then vCPU 0's
     * STXR: vCPU 0 was switched out between LDXR and STXR. Unicorn's STXR alone would succeed (fact d); the switch cleared
     * vCPU 0's monitor, so it fails, as on a CPU.
     */
    @Test
    void arm64SwitchClearsTheOutgoingExclusiveMonitor() throws Exception {
        Guest g = Guest.ARM64;
        long data = g.data() + 0x200;
        try (Rig r = g.rig(2)) {
            r.m.setSchedule(Schedule.roundRobin(3));
            r.m.memory().writeLong(data, 5);
            r.load(0, Guest.imm("x9", data) + "mov x2, #0xdead\n b load\n"
                    + "load:\n ldxr x1, [x9]\n add x1, x1, #1\n b store\n"
                    + "store:\n stxr w2, x1, [x9]\n" + g.idleForever());
            r.load(1, Guest.imm("x9", data) + "mov x5, #5\n b store\n store:\n str x5, [x9]\n" + g.idleForever());
            List<String> log = r.recordSwitches();
            assertInstanceOf(StopReason.Halted.class, r.m.run(BUDGET));
            assertTrue(log.size() >= 3, log.toString());
            assertEquals(1, r.m.engine(0).regRead(Arm64Reg.X2), "STXR failed: the monitor was cleared at the switch");
            assertEquals(5, r.m.memory().readLong(data));
        }
    }

    // ------------------------------------------------------------------ cost

    /**
     * What the machine's loop costs with N vCPUs: each vCPU runs a register loop (4 instructions, one
     * block) for {@code -Dkpemu.smp.instructions=} (default 2,000,000) instructions in all, round-robin
     * with quanta of 1,000 / 10,000 / 100,000; N = 1 is the one-vCPU loop with its default slice.
     * Printed (lines {@code SMP-FACT machine}, the second of two passes), never asserted beyond the
     * instruction count; the thread's CPU time.
     */
    @ParameterizedTest
    @EnumSource(Guest.class)
    void machineLoopCost(Guest g) throws Exception {
        long total = Long.getLong("kpemu.smp.instructions", 2_000_000);
        String loop = g == Guest.X86
                ? "mov $0x7fffffff, %ecx\n top: add $1, %rax\n mov %rax, %rdx\n dec %rcx\n jnz top\n hlt\n"
                : "movz x2, #0xffff, lsl #16\n top: add x0, x0, #1\n mov x3, x0\n subs x2, x2, #1\n b.ne top\n" + g.idleForever();
        var bean = java.lang.management.ManagementFactory.getThreadMXBean();
        StringBuilder line = new StringBuilder();
        for (int pass = 0; pass < 2; pass++) {                              // the first pass warms the JIT up
          line.setLength(0);
          line.append("SMP-FACT machine " + g + " M instructions/s (thread CPU):");
          for (int n : new int[] {1, 2, 4}) {
            for (long q : n == 1 ? new long[] {Machine.DEFAULT_SLICE} : new long[] {1_000, 10_000, 100_000}) {
                try (Rig r = g.rig(n)) {
                    r.m.setSchedule(Schedule.roundRobin(q));
                    for (int cpu = 0; cpu < n; cpu++) r.load(cpu, loop);
                    r.m.run(total / 10);                                       // warm-up: translation, JIT
                    long t0 = bean.getCurrentThreadCpuTime(), i0 = r.m.clock().instructions();
                    assertInstanceOf(StopReason.BudgetExhausted.class, r.m.run(total));
                    long ns = bean.getCurrentThreadCpuTime() - t0, ran = r.m.clock().instructions() - i0;
                    assertTrue(ran >= total && ran < total + 8, "ran " + ran);
                    line.append(String.format(java.util.Locale.ROOT, " N=%d q=%d %.0f (%d switches);", n, q, ran * 1e3 / ns, r.m.cpuSwitches()));
                }
            }
          }
        }
        System.out.println(line);
    }

    // snapshots of several vCPUs, once refused here: SmpSnapshotTest
}
