package dev.kpemu.machine.arm64.devices;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.board.Arm64Board;
import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.SysRegs;

/** The generic timer through the guest's own MRS/MSR, the GIC and the IRQ vector. */
class GenericTimerTest {
    static final long RAM = Arm64Layout.RAM_BASE, RESULTS = RAM + 0x1_0000;
    static final String POWER_OFF = "movz x0, #0x8400, lsl #16\n movk x0, #8\n hvc #0\n b .\n";

    static String withVectors(String body, String irqHandler) {
        StringBuilder v = new StringBuilder();
        for (int i = 0; i < 16; i++) v.append(".align 7\n").append(i == 5 ? "b irq\n" : "b unexpected\n");
        return "adr x0, vectors\n msr vbar_el1, x0\n isb\n" + body + POWER_OFF
                + "unexpected:\n movz x0, #0x8400, lsl #16\n movk x0, #9\n hvc #0\n b .\n"
                + "irq:\n" + irqHandler + ".align 11\nvectors:\n" + v;
    }

    static Arm64Board board(String source) {
        Arm64Board b = Arm64Board.create(16L << 20, c -> { });
        b.machine().memory().write(RAM, Asm.arm64(source, 0));
        b.machine().setReg(Arm64Reg.SP, RAM + 0x8000);
        b.machine().setReg(Arm64Reg.X24, RESULTS);
        b.machine().setPc(RAM);
        return b;
    }

    @Test
    void virtualTimerInterruptWakesWfiAfterOneMillisecond() {
        String body = """
                movz x1, #0x0800, lsl #16
                mov w2, #1
                str w2, [x1]
                mov w2, #0x8000000
                str w2, [x1, #0x100]
                movz x3, #0x0801, lsl #16
                mov w2, #0xf0
                str w2, [x3, #4]
                mov w2, #1
                str w2, [x3]
                mrs x4, cntfrq_el0
                str x4, [x24]
                mrs x5, cntvct_el0
                str x5, [x24, #8]
                movz x6, #62500
                add x6, x5, x6
                msr cntv_cval_el0, x6
                mov x7, #1
                msr cntv_ctl_el0, x7
                mov x20, #0
                msr daifclr, #2
                wait:
                wfi
                cbz x20, wait
                mrs x8, cntvct_el0
                str x8, [x24, #16]
                """;
        String irq = """
                ldr w9, [x3, #0xc]
                str x9, [x24, #24]
                mrs x10, cntvct_el0
                str x10, [x24, #32]
                mrs x11, cntv_ctl_el0
                str x11, [x24, #40]
                mov x12, #3
                msr cntv_ctl_el0, x12
                str w9, [x3, #0x10]
                mov x20, #1
                eret
                """;
        try (Arm64Board b = board(withVectors(body, irq))) {
            Arm64Machine m = b.machine();
            StopReason r = m.run(10_000_000);
            assertInstanceOf(StopReason.PoweredOff.class, r, () -> r + " at 0x" + Long.toHexString(m.pc()));
            long start = m.memory().readLong(RESULTS + 8);
            assertEquals(GenericTimer.FREQUENCY_HZ, m.memory().readLong(RESULTS), "CNTFRQ_EL0");
            assertEquals(GenericTimer.PPI_VIRT, m.memory().readLong(RESULTS + 24), "GICC_IAR: the virtual timer's PPI");
            long atIrq = m.memory().readLong(RESULTS + 32);
            assertTrue(atIrq >= start + 62500 && atIrq < start + 62500 + 100, "IRQ at the compare value: " + (atIrq - start));
            assertEquals(GenericTimer.CTL_ENABLE | GenericTimer.CTL_ISTATUS, m.memory().readLong(RESULTS + 40), "CNTV_CTL in the handler");
            assertTrue(m.clock().instructions() < 1000, "WFI idled instead of spinning: " + m.clock().instructions() + " instructions");
            assertTrue(Math.abs(m.clock().nanos() - 1_000_000) < 10_000, "about 1 ms of guest time: " + m.clock().nanos());
            assertEquals(1, m.irqsTaken());
            assertEquals(1, b.gic().acknowledged());
            assertTrue(!b.timer().virtual().interruptLine(), "IMASK lowered the line");
        }
    }

    @Test
    void counterAdvancesInsideASlice() {
        String body = """
                mrs x1, cntvct_el0
                movz x2, #16000
                spin:
                subs x2, x2, #1
                b.ne spin
                mrs x3, cntvct_el0
                sub x4, x3, x1
                str x4, [x24]
                """;
        try (Arm64Board b = board(withVectors(body, "b .\n"))) {
            Arm64Machine m = b.machine();
            m.setSliceInstructions(10_000_000);
            assertInstanceOf(StopReason.PoweredOff.class, m.run(10_000_000));
            long ticks = m.memory().readLong(RESULTS);
            // 32000 loop instructions at 1 ns each = 2000 ticks of 16 ns.
            assertTrue(ticks >= 1990 && ticks <= 2010, "ticks " + ticks);
        }
    }

    @Test
    void counterReadsAreAnsweredWithoutJava() {
        // CNTVCT_EL0 and CNTPCT_EL0 are read natively (kpemu_sysreg_filter); CNTFRQ still reaches Java.
        String body = """
                mrs x1, cntvct_el0
                mrs x2, cntpct_el0
                mrs x3, cntfrq_el0
                """;
        try (Arm64Board b = board(withVectors(body, "b .\n"))) {
            Arm64Machine m = b.machine();
            assertInstanceOf(StopReason.PoweredOff.class, m.run(1_000_000));
            assertEquals(2, b.timer().nativeCounterReads(), "CNTVCT and CNTPCT");
            assertEquals(1, b.timer().javaHookCalls(), "only CNTFRQ reached Java");
            assertEquals(3, b.timer().accesses());
        }
    }

    @Test
    void timerRegisterSemantics() {
        try (Arm64Board b = board(withVectors("", "b .\n"))) {
            GenericTimer t = b.timer();
            b.machine().clock().advance(1_000_000);              // 1 ms: counter 62500
            long now = t.counter();
            assertEquals(62_500, now);
            assertTrue(t.write(SysRegs.CNTV_TVAL_EL0, 100));
            assertEquals(now + 100, t.read(SysRegs.CNTV_CVAL_EL0));
            assertEquals(100, t.read(SysRegs.CNTV_TVAL_EL0));
            assertEquals(0L, t.read(SysRegs.CNTV_CTL_EL0), "disabled: no ISTATUS");
            t.write(SysRegs.CNTV_TVAL_EL0, 0xffff_ff00L);            // -256: already expired
            t.write(SysRegs.CNTV_CTL_EL0, GenericTimer.CTL_ENABLE);
            assertEquals(GenericTimer.CTL_ENABLE | GenericTimer.CTL_ISTATUS, t.read(SysRegs.CNTV_CTL_EL0));
            assertEquals(0xffff_ff00L, t.read(SysRegs.CNTV_TVAL_EL0), "TVAL is the signed distance, 32 bits");
            assertTrue(t.virtual().interruptLine());
            assertTrue(b.gic().isPending(GenericTimer.PPI_VIRT));
            t.write(SysRegs.CNTV_CTL_EL0, GenericTimer.CTL_ENABLE | GenericTimer.CTL_IMASK);
            assertTrue(!t.virtual().interruptLine(), "IMASK");
            assertTrue(!b.gic().isPending(GenericTimer.PPI_VIRT));
            t.write(SysRegs.CNTP_CVAL_EL0, now + 5);
            t.write(SysRegs.CNTP_CTL_EL0, GenericTimer.CTL_ENABLE);
            assertTrue(b.machine().clock().hasEvents(), "physical timer scheduled");
            assertTrue(t.write(SysRegs.CNTFRQ_EL0, 1), "CNTFRQ writes are ignored");
            assertEquals(GenericTimer.FREQUENCY_HZ, t.read(SysRegs.CNTFRQ_EL0));
            assertEquals(null, t.read(SysRegs.CNTKCTL_EL1), "not a timer register");
        }
    }

    @Test
    void physicalTimerRegistersFromTheGuestAtEl1() {
        String body = """
                mrs x1, cntpct_el0
                movz x2, #1000
                add x2, x1, x2
                msr cntp_cval_el0, x2
                mov x3, #1
                msr cntp_ctl_el0, x3
                mrs x4, cntp_cval_el0
                str x4, [x24]
                mrs x5, cntp_tval_el0
                str x5, [x24, #8]
                mrs x6, cntp_ctl_el0
                str x6, [x24, #16]
                str x2, [x24, #24]
                """;
        try (Arm64Board b = board(withVectors(body, "b .\n"))) {
            Arm64Machine m = b.machine();
            StopReason r = m.run(1_000_000);
            assertInstanceOf(StopReason.PoweredOff.class, r, () -> r + " at 0x" + Long.toHexString(m.pc()));
            assertEquals(m.memory().readLong(RESULTS + 24), m.memory().readLong(RESULTS), "CNTP_CVAL reads back");
            long tval = m.memory().readLong(RESULTS + 8);
            assertTrue(tval > 990 && tval <= 1000, "CNTP_TVAL counts down: " + tval);
            assertEquals(GenericTimer.CTL_ENABLE, m.memory().readLong(RESULTS + 16), "enabled, not yet expired");
            assertTrue(m.clock().hasEvents(), "expiry scheduled");
        }
    }
}
