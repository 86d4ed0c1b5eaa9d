package dev.kpemu.machine.arm64;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.Device;
import dev.kpemu.machine.MemoryRegion;
import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.WatchHit;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;

/** Bare-metal guests with the MMU off (identity): MMIO, EL0 SVC, BRK, WFI, PSCI. */
class Arm64MachineTest {
    static final long RAM = Arm64Layout.RAM_BASE;
    static final long RESULTS = RAM + 0x1_0000;
    static final long STACK_EL1 = RAM + 0x8000, STACK_EL0 = RAM + 0x9000;
    static final String POWER_OFF = Arm64MmuTest.POWER_OFF;
    /** Drops to EL0 (EL0t, SP_EL0 = x19) at the label {@code user}, which the rest of the body defines. */
    static final String TO_EL0_AT_USER = """
            adr x0, user
            msr elr_el1, x0
            msr spsr_el1, xzr
            msr sp_el0, x19
            isb
            eret
        user:
        """;

    /** Guest at RAM_BASE: VBAR_EL1 = vectors, {@code body}, power off; vector slots (index → label) branch to handlers. */
    static String program(String body, Map<Integer, String> slots, String handlers) {
        StringBuilder v = new StringBuilder();
        for (int i = 0; i < 16; i++) v.append(".align 7\nb ").append(slots.getOrDefault(i, "unexpected")).append('\n');
        return "adr x0, vectors\n msr vbar_el1, x0\n isb\n" + body + POWER_OFF + "b .\nunexpected:\n" + Arm64MmuTest.RESET + "b .\n"
                + handlers + ".align 11\nvectors:\n" + v;
    }

    static final int SYNC_SPX = 4, IRQ_SPX = 5, SYNC_LOWER = 8;

    static Arm64Machine boot(String source) {
        Arm64Machine m = Arm64Machine.create(16L << 20);
        m.memory().write(RAM, Asm.arm64(source, 0));
        m.setReg(Arm64Reg.SP, STACK_EL1);
        m.setReg(Arm64Reg.X24, RESULTS);
        m.setReg(Arm64Reg.X19, STACK_EL0);
        m.setPc(RAM);
        return m;
    }

    /** A device recording every access; reads return 0xc0de_0000 + offset, cut to the access size. */
    static final class RecordingDevice implements Device.Mmio {
        final List<String> log = new ArrayList<>();
        Runnable onWrite = () -> {};

        @Override public String name() { return "recorder"; }
        @Override public long mmioSize() { return 0x1000; }
        @Override public long read(long offset, int size) {
            log.add(String.format("R %x/%d", offset, size));
            long v = 0xc0de_0000L + offset;
            return size == 8 ? v : v & ((1L << (8 * size)) - 1);
        }
        @Override public void write(long offset, int size, long value) {
            log.add(String.format("W %x/%d=%x", offset, size, value));
            onWrite.run();
        }
    }

    @Test
    void createdMachineStartsAtEl1hWithRam() {
        try (Arm64Machine m = Arm64Machine.create(16L << 20)) {
            assertEquals(1, m.currentEl());
            assertEquals(Arm64Machine.PSTATE_EL1H_MASKED, m.pstate());
            MemoryRegion ram = m.memory().region(Arm64Layout.RAM_REGION);
            assertEquals(RAM, ram.base());
            assertEquals(16L << 20, ram.size());
            assertEquals(RAM, m.pc());
            assertEquals(0x531, m.sysReg(3, 6, 1, 1, 0) & 0xfff, "SCR_EL3 = RW|HCE|NS (+RES1)");
        }
    }

    @Test
    void mmioDeviceSeesTheGuestsAccesses() {
        String body = """
                movz x2, #0x0900, lsl #16
                mov w1, #0x41
                strb w1, [x2]
                mov w1, #0xbeef
                strh w1, [x2, #6]
                movz w1, #0x1234, lsl #16
                movk w1, #0x5678
                str w1, [x2, #0x10]
                ldr w3, [x2, #0x20]
                ldrb w4, [x2, #0x31]
                movz x5, #0x1122, lsl #48
                movk x5, #0x3344, lsl #32
                movk x5, #0x5566, lsl #16
                movk x5, #0x7788
                str x5, [x2, #0x40]
            """;
        try (Arm64Machine m = boot(program(body, Map.of(), ""))) {
            RecordingDevice dev = m.bus().attach(Arm64Layout.UART_BASE, new RecordingDevice());
            assertEquals(new StopReason.PoweredOff(0), m.run(10_000));
            // Unicorn 2.1.1 splits an 8-byte MMIO access into two 4-byte ones (low half first).
            assertEquals(List.of("W 0/1=41", "W 6/2=beef", "W 10/4=12345678", "R 20/4", "R 31/1",
                    "W 40/4=55667788", "W 44/4=11223344"), dev.log);
            assertEquals(0xc0de_0020L, m.reg(Arm64Reg.X3));
            assertEquals(0x31, m.reg(Arm64Reg.X4));
        }
    }

    @Test
    void svcFromEl0ReachesTheEl1HandlerAndErets() {
        String body = TO_EL0_AT_USER + """
                mov x0, #5
                svc #0x1234
                add x1, x0, #1
                mov x2, sp
                svc #0x42
                b .
            """;
        String handlers = """
            el0sync:
                mrs x9, esr_el1
                mrs x10, elr_el1
                mrs x11, spsr_el1
                mrs x12, CurrentEL
                and x13, x9, #0xffff
                cmp x13, #0x42
                b.eq finish
                stp x9, x10, [x24]
                stp x11, x12, [x24, #16]
                mov x15, sp
                str x15, [x24, #32]
                add x0, x0, #100
                eret
            finish:
                stp x1, x2, [x24, #48]
                mrs x12, CurrentEL
                str x12, [x24, #64]
            """ + POWER_OFF;
        try (Arm64Machine m = boot(program(body, Map.of(SYNC_LOWER, "el0sync"), handlers))) {
            assertEquals(new StopReason.PoweredOff(0), m.run(10_000));
            long user = RAM + 4 * (3 + 6);
            assertEquals(0x5600_1234L, m.memory().readLong(RESULTS), "ESR: EC 0x15 (SVC AArch64), IL, imm16");
            assertEquals(user + 8, m.memory().readLong(RESULTS + 8), "ELR: the instruction after svc");
            assertEquals(0, m.memory().readLong(RESULTS + 16), "SPSR: EL0t, flags and DAIF clear");
            assertEquals(0b0100, m.memory().readLong(RESULTS + 24), "CurrentEL in the handler");
            assertEquals(STACK_EL1, m.memory().readLong(RESULTS + 32), "handler runs on SP_EL1");
            assertEquals(106, m.memory().readLong(RESULTS + 48), "x0 changed by the handler, back at EL0");
            assertEquals(STACK_EL0, m.memory().readLong(RESULTS + 56), "EL0 runs on SP_EL0");
            assertEquals(0b0100, m.memory().readLong(RESULTS + 64));
            assertEquals(1, m.currentEl());
            assertEquals(2, m.exceptionsTaken());
        }
    }

    /**
     * The SVCs after the first are taken by the native hook, which makes ESR_EL1 from the SVC's own
     * imm16 (EC 0x15, IL) instead of copying the whole saved CPU state to read QEMU's: each handler
     * run sees its own SVC's syndrome.
     */
    @Test
    void svcTakenNativelyHasItsOwnSyndrome() {
        String body = TO_EL0_AT_USER + """
                svc #0x1234
                svc #0xbeef
                svc #0
                svc #0x42
                b .
            """;
        String handlers = """
            el0sync:
                mrs x9, esr_el1
                str x9, [x24], #8
                and x13, x9, #0xffff
                cmp x13, #0x42
                b.eq finish
                eret
            finish:
            """ + POWER_OFF;
        try (Arm64Machine m = boot(program(body, Map.of(SYNC_LOWER, "el0sync"), handlers))) {
            assertEquals(new StopReason.PoweredOff(0), m.run(10_000));
            assertEquals(0x5600_1234L, m.memory().readLong(RESULTS), "the first SVC (the host's path)");
            assertEquals(0x5600_beefL, m.memory().readLong(RESULTS + 8));
            assertEquals(0x5600_0000L, m.memory().readLong(RESULTS + 16));
            assertEquals(0x5600_0042L, m.memory().readLong(RESULTS + 24));
            assertEquals(4, m.exceptionsTaken());
            assertEquals(3, m.nativeSvcsTaken(), "the SVCs after the vector was verified");
            assertEquals(0, m.svcSyndromesFromContext(), "every native SVC's syndrome made from its instruction");
        }
    }

    /**
     * A watched store in the handler of an SVC reports its own instruction, for the SVC the host
     * delivers and for the native ones. A PC write from a hook through Unicorn's register write makes
     * the engine skip the pc sync of later memory hooks until its next exit request.
     */
    @Test
    void aWatchedStoreAfterAnSvcReportsItsOwnPc() {
        String body = TO_EL0_AT_USER + """
                svc #1
                svc #2
                svc #0x42
                b .
            """;
        String handlers = """
            el0sync:
                adr x14, store
                add x15, x15, #1
            store:
                str x15, [x24, #0x100]
                str x14, [x24, #0x108]
                mrs x9, esr_el1
                and x13, x9, #0xffff
                cmp x13, #0x42
                b.eq finish
                eret
            finish:
            """ + POWER_OFF;
        List<WatchHit> hits = new ArrayList<>();
        try (Arm64Machine m = boot(program(body, Map.of(SYNC_LOWER, "el0sync"), handlers))) {
            m.watchpoints().add(RESULTS + 0x100, 8, false, true, hits::add);
            assertEquals(new StopReason.PoweredOff(0), m.run(10_000));
            long store = m.memory().readLong(RESULTS + 0x108);
            assertEquals(3, hits.size(), hits.toString());
            for (WatchHit h : hits) assertEquals(store, h.pc(), "the store's own address: " + hits);
            assertEquals(2, m.nativeSvcsTaken(), "the SVCs after the first were native");
        }
    }

    @Test
    void hostPstateChangeTakesEffect() {
        // The host drops to EL0 with setPstate; an EL0 read of CurrentEL must then UNDEF (EC 0) to VBAR+0x400.
        String body = "movz x0, #0x4000, lsl #16\n add x0, x0, #0x100\n br x0\n";
        String handlers = """
            el0sync:
                mrs x9, esr_el1
                mrs x10, elr_el1
                stp x9, x10, [x24]
            """ + POWER_OFF;
        try (Arm64Machine m = boot(program(body, Map.of(SYNC_LOWER, "el0sync"), handlers))) {
            m.memory().write(RAM + 0x100, Asm.arm64("mrs x3, CurrentEL\n b .", 0));
            assertEquals(new StopReason.BudgetExhausted(), m.run(3 + 3));
            assertEquals(RAM + 0x100, m.pc());
            m.setReg(Arm64Reg.SP_EL0, STACK_EL0);
            m.setPstate(0);                     // EL0t
            m.setReg(Arm64Reg.SP, STACK_EL0);
            assertEquals(0, m.currentEl());
            assertEquals(new StopReason.PoweredOff(0), m.run(1000));
            assertEquals(0x0200_0000L, m.memory().readLong(RESULTS), "UNDEF at EL0");
            assertEquals(RAM + 0x100, m.memory().readLong(RESULTS + 8));
        }
    }

    @Test
    void brkGoesToTheTrapHandlerFirstThenToTheGuest() {
        String body = """
                mov x23, #0
                brk #0x11
                brk #0x22
                mov x7, #7
            """;
        String handlers = """
            brkh:
                mrs x9, esr_el1
                mrs x10, elr_el1
                add x23, x23, #1
                stp x9, x10, [x24]
                add x10, x10, #4
                msr elr_el1, x10
                eret
            """;
        try (Arm64Machine m = boot(program(body, Map.of(SYNC_SPX, "brkh"), handlers))) {
            List<String> seen = new ArrayList<>();
            m.setTrapHandler((mach, address, imm) -> {
                seen.add(Long.toHexString(address) + ":" + Integer.toHexString(imm));
                if (imm != 0x11) return false;
                mach.setPc(address + 4);
                return true;
            });
            assertEquals(new StopReason.PoweredOff(0), m.run(10_000));
            long brk1 = RAM + 4 * 4;
            assertEquals(List.of(Long.toHexString(brk1) + ":11", Long.toHexString(brk1 + 4) + ":22"), seen);
            assertEquals(1, m.reg(Arm64Reg.X23), "only the unconsumed BRK reached the guest");
            assertEquals(0xf200_0022L, m.memory().readLong(RESULTS), "ESR: EC 0x3c, IL, imm16");
            assertEquals(brk1 + 4, m.memory().readLong(RESULTS + 8), "ELR: the BRK itself");
            assertEquals(7, m.reg(Arm64Reg.X7));
        }
    }

    @Test
    void wfiIdlesToAClockEventThatRaisesAnIrqThenHaltsWhenMasked() {
        String body = """
                mov x6, #0
                msr daifclr, #2
                wfi
                mov x5, #1
                msr daifset, #2
                wfi
                mov x5, #2
            """;
        String handlers = """
            irq:
                movz x2, #0x0900, lsl #16
                str wzr, [x2]
                add x6, x6, #1
                mrs x7, elr_el1
                eret
            """;
        try (Arm64Machine m = boot(program(body, Map.of(IRQ_SPX, "irq"), handlers))) {
            RecordingDevice dev = m.bus().attach(Arm64Layout.UART_BASE, new RecordingDevice());
            dev.onWrite = () -> m.setInterruptLine(33, false);
            long[] firedAt = {-1};
            m.clock().schedule(50_000, now -> {
                firedAt[0] = now;
                m.setInterruptLine(33, true);
            });
            long wfi1 = RAM + 4 * 5, wfi2 = wfi1 + 12;   // after adr, msr, isb, mov, msr
            StopReason r = m.run(1_000_000);
            assertEquals(new StopReason.Halted(wfi2 + 4), r);
            assertEquals(50_000, firedAt[0], "the event fired at its own time while idle");
            assertTrue(m.clock().nanos() >= 50_000);
            assertTrue(m.clock().instructions() < 1_000_000, "idle time is not executed instructions");
            assertEquals(1, m.reg(Arm64Reg.X6), "one IRQ taken");
            assertEquals(wfi1 + 4, m.reg(Arm64Reg.X7), "IRQ ELR: the instruction after WFI");
            assertEquals(1, m.reg(Arm64Reg.X5));
            assertEquals(List.of("W 0/4=0"), dev.log);
            // A line raised while I is masked wakes nothing on its own and is not taken; resuming goes on after the WFI.
            m.setInterruptLine(33, true);
            assertEquals(new StopReason.PoweredOff(0), m.run(1000));
            assertEquals(2, m.reg(Arm64Reg.X5));
            assertEquals(1, m.reg(Arm64Reg.X6));
        }
    }

    @Test
    void irqRaisedByTheHostInterruptsEl0ThroughTheLowerElVector() {
        String body = TO_EL0_AT_USER + """
                add x8, x8, #1
                b user
            """;
        String handlers = """
            el0irq:
                mrs x9, spsr_el1
                mrs x10, elr_el1
                mov x11, sp
                stp x9, x10, [x24]
                str x11, [x24, #16]
                movz x2, #0x0900, lsl #16
                str wzr, [x2]
            """ + POWER_OFF;
        try (Arm64Machine m = boot(program(body, Map.of(SYNC_LOWER + 1, "el0irq"), handlers))) {
            RecordingDevice dev = m.bus().attach(Arm64Layout.UART_BASE, new RecordingDevice());
            dev.onWrite = () -> m.setInterruptLine(40, false);
            assertEquals(new StopReason.BudgetExhausted(), m.run(1001));
            assertEquals(0, m.currentEl());
            m.setInterruptLine(40, true);
            assertEquals(new StopReason.PoweredOff(0), m.run(1000));
            long user = RAM + 4 * (3 + 6);
            assertEquals(0, m.memory().readLong(RESULTS), "SPSR: EL0t");
            long elr = m.memory().readLong(RESULTS + 8);
            assertTrue(elr == user || elr == user + 4, "ELR inside the EL0 loop: " + Long.toHexString(elr));
            assertEquals(STACK_EL1, m.memory().readLong(RESULTS + 16), "handler on SP_EL1");
            assertEquals(STACK_EL0, m.reg(Arm64Reg.SP_EL0), "EL0's SP banked");
            assertEquals(List.of("W 0/4=0"), dev.log);
        }
    }

    @Test
    void maskedWfiWithAnEventWakesWithoutTakingTheIrq() {
        String body = """
                wfi
                mov x5, #1
            """;
        try (Arm64Machine m = boot(program(body, Map.of(IRQ_SPX, "unexpected"), ""))) {
            m.clock().schedule(10_000, now -> m.setInterruptLine(1, true));
            assertEquals(new StopReason.PoweredOff(0), m.run(1_000_000));
            assertEquals(1, m.reg(Arm64Reg.X5));
            assertTrue(m.clock().nanos() >= 10_000);
        }
    }

    @Test
    void psciVersionFeaturesUnsupportedAndReset() {
        String body = """
                movz x0, #0x8400, lsl #16
                hvc #0
                mov x10, x0
                movz x0, #0x8400, lsl #16
                movk x0, #0xa
                movz x1, #0x8400, lsl #16
                movk x1, #8
                hvc #0
                mov x11, x0
                movz x0, #0x8400, lsl #16
                movk x0, #2
                hvc #0
                mov x12, x0
            """ + Arm64MmuTest.RESET;
        try (Arm64Machine m = boot(program(body, Map.of(), ""))) {
            assertEquals(new StopReason.Reset(), m.run(10_000));
            assertEquals(0x1_0000, m.reg(Arm64Reg.X10), "PSCI 1.0");
            assertEquals(0, m.reg(Arm64Reg.X11), "FEATURES(SYSTEM_OFF) = SUCCESS");
            assertEquals(-1, m.reg(Arm64Reg.X12), "CPU_OFF: NOT_SUPPORTED");
            assertEquals(0, m.exceptionsTaken(), "HVC never reaches the guest");
        }
    }

    @Test
    void exceptionWithoutAVectorTableStopsWithAGuestError() {
        try (Arm64Machine m = Arm64Machine.create(16L << 20)) {
            m.memory().write(RAM, Asm.arm64("mov x1, #1\n svc #3\n b .", 0));
            StopReason r = m.run(1000);
            assertTrue(r instanceof StopReason.GuestError, r.toString());
            assertEquals(RAM + 8, ((StopReason.GuestError) r).pc());
        }
    }

    /**
     * Host breakpoints are checked when Unicorn translates the block at the address
     * (kpemu_clock.c): the run stops before that block at every arrival, also the ones right after
     * resuming from it (the loop comes back within a few instructions, in the same slice), and
     * runs through once the break is removed. A guarded text range at the same address is checked
     * there too, and removing it leaves the break working.
     */
    @Test
    void hostBreakpointStopsAtEveryArrivalBeforeItsBlock() {
        String body = """
                mov x1, #0
                loop:
                bl bump
                cmp x1, #3
                b.ne loop
            """;
        try (Arm64Machine m = boot(program(body, Map.of(), ".align 12\nbump:\nadd x1, x1, #1\nret\n"))) {
            long bump = RAM + 0x1000;
            assertEquals(0x91000421L, m.memory().readLong(bump) & 0xffffffffL, "add x1, x1, #1 at the break address");
            int guarded = m.textGuard().add(bump, bump, 4, (id, va, pa, was, now) -> { });
            m.addBreakpoint(bump);
            assertEquals(new StopReason.Breakpoint(bump), m.run(10_000));
            assertEquals(bump, m.pc());
            assertEquals(0, m.engine().regRead(Arm64Reg.X1), "stopped before the block ran");
            m.textGuard().remove(guarded);
            assertEquals(new StopReason.Breakpoint(bump), m.run(10_000), "the break outlives the guarded range in its granule");
            assertEquals(1, m.engine().regRead(Arm64Reg.X1), "resumed from the break: the block ran once");
            assertEquals(new StopReason.Breakpoint(bump), m.run(10_000));
            assertEquals(2, m.engine().regRead(Arm64Reg.X1), "the third arrival stops too");
            m.removeBreakpoint(bump);
            assertEquals(new StopReason.PoweredOff(0), m.run(10_000));
            assertEquals(3, m.engine().regRead(Arm64Reg.X1));
        }
    }

    /**
     * A breakpoint at an instruction inside a block ({@code Machine.addInstructionBreakpoints}, a
     * uprobe at any offset): every arrival stops before it, reached inside a block or as its start,
     * two in one block in order, and the guest runs the same instructions as without them.
     */
    @Test
    void instructionBreakpointsInsideABlockStopBeforeTheirInstruction() {
        checkInstructionBreakpoints(false);
    }

    /**
     * The same at EL0, where uprobes are: Unicorn stops at an exit as at a WFI, which EL0 traps
     * (SCTLR_EL1.nTWI clear, as at reset and under Linux) with the PC one instruction back; the
     * machine takes that trap as the exit's stop, so the guest never sees it.
     */
    @Test
    void instructionBreakpointsAtEl0StopBeforeTheirInstruction() {
        checkInstructionBreakpoints(true);
    }

    /**
     * A loop whose first arrival at {@code loop} is inside the block at {@code go}, with {@code mid}
     * inside every block, at EL1 or (after {@link #TO_EL0_AT_USER}, powering off through an svc) EL0.
     */
    private static void checkInstructionBreakpoints(boolean el0) {
        String loopBody = """
                mov x1, #0
                mov x2, #0
                b go
                go:
                nop
                loop:
                add x1, x1, #1
                add x2, x2, x1
                cmp x1, #3
                b.ne loop
            """;
        String source = el0 ? program(TO_EL0_AT_USER + loopBody + "svc #0\nb .\n", Map.of(SYNC_LOWER, "el0sync"), "el0sync:\n" + POWER_OFF)
                : program(loopBody, Map.of(), "");
        long loop = RAM + 4 * (3 + (el0 ? 6 : 0)) + 16, mid = loop + 4;
        long plainCount;
        try (Arm64Machine m = boot(source)) {
            assertEquals(0x91000421L, m.memory().readLong(loop) & 0xffffffffL, "add x1, x1, #1 at loop");
            assertEquals(0x8b010042L, m.memory().readLong(mid) & 0xffffffffL, "add x2, x2, x1 at mid");
            assertEquals(new StopReason.PoweredOff(0), m.run(10_000));
            plainCount = m.clock().instructions();
        }
        try (Arm64Machine m = boot(source)) {
            List<String> hits = new ArrayList<>();
            dev.kpemu.machine.Machine.BreakpointAction note = (mc, at) -> {
                hits.add((at == loop ? "loop" : "mid") + " x1=" + mc.engine().regRead(Arm64Reg.X1) + " el=" + ((Arm64Machine) mc).currentEl());
                return true;
            };
            m.addInstructionBreakpoints(new long[] {mid, loop}, note);
            assertEquals(new StopReason.PoweredOff(0), m.run(10_000));
            String el = " el=" + (el0 ? 0 : 1);
            assertEquals(List.of("loop x1=0" + el, "mid x1=1" + el, "loop x1=1" + el, "mid x1=2" + el, "loop x1=2" + el, "mid x1=3" + el), hits);
            assertEquals(6, m.engine().regRead(Arm64Reg.X2));
            if (el0) assertEquals(1, m.exceptionsTaken(), "only the svc reached the guest's vector");
            assertEquals(plainCount, m.clock().instructions(), "the same instructions ran");
        }
    }
}
