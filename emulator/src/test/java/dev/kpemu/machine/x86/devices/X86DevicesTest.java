package dev.kpemu.machine.x86.devices;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.IrqLine;
import dev.kpemu.machine.VirtualClock;

/** Register-level behaviour of the x86 PC devices (no engine needed). */
class X86DevicesTest {
    private static final int B = Uart16550.COM1_BASE;

    @Test
    void uartReceiveRaisesTheReceivedDataInterrupt() {
        java.util.List<Boolean> irq = new java.util.ArrayList<>();
        Uart16550 u = new Uart16550(new ByteArrayOutputStream(), irq::add);
        u.out(B + Uart16550.IER, 1, Uart16550.IER_ERBFI);
        u.out(B + Uart16550.MCR, 1, Uart16550.MCR_OUT2);
        assertEquals(Uart16550.RX_FIFO_DEPTH, u.receiveSpace());
        u.receive("hi".getBytes());
        assertEquals(java.util.List.of(true), irq, "received data raises IRQ 4/3 (gated by OUT2)");
        assertEquals(Uart16550.RX_FIFO_DEPTH - 2, u.receiveSpace());
        assertEquals(Uart16550.IIR_RDI, u.in(B + Uart16550.IIR_FCR, 1));
        assertEquals(Uart16550.LSR_DR, u.in(B + Uart16550.LSR, 1) & Uart16550.LSR_DR);
        assertEquals('h', u.in(B + Uart16550.RBR_THR, 1));
        assertEquals(java.util.List.of(true), irq, "one byte still waits");
        assertEquals('i', u.in(B + Uart16550.RBR_THR, 1));
        assertEquals(java.util.List.of(true, false), irq);
        assertEquals(0, u.in(B + Uart16550.LSR, 1) & Uart16550.LSR_DR);
        assertEquals(Uart16550.IIR_NO_INT, u.in(B + Uart16550.IIR_FCR, 1));
    }

    @Test
    void uartTransmitsAndRaisesThreWhenEnabled() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        List<Boolean> irq = new ArrayList<>();
        Uart16550 u = new Uart16550(out, irq::add);
        assertEquals(Uart16550.LSR_THRE | Uart16550.LSR_TEMT, u.in(B + Uart16550.LSR, 1));
        assertEquals(Uart16550.IIR_NO_INT, u.in(B + Uart16550.IIR_FCR, 1));
        u.out(B + Uart16550.RBR_THR, 1, 'A');
        assertEquals("A", out.toString());
        // THRE interrupt: pending as soon as ETBEI is enabled, gated to the pin by OUT2
        u.out(B + Uart16550.IER, 1, Uart16550.IER_ETBEI);
        assertFalse(u.irqLevel());
        u.out(B + Uart16550.MCR, 1, Uart16550.MCR_OUT2);
        assertTrue(u.irqLevel());
        assertEquals(Uart16550.IIR_THRI, u.in(B + Uart16550.IIR_FCR, 1));
        assertFalse(u.irqLevel(), "reading IIR that reports THRI clears it");
        assertEquals(Uart16550.IIR_NO_INT, u.in(B + Uart16550.IIR_FCR, 1));
        u.out(B + Uart16550.RBR_THR, 1, 'B');
        assertTrue(u.irqLevel(), "THR empties at once: THRE again");
        u.out(B + Uart16550.IER, 1, 0);
        assertFalse(u.irqLevel());
        assertEquals(List.of(true, false, true, false), irq);
        // FIFO bits in IIR once FCR enables the FIFO
        u.out(B + Uart16550.IIR_FCR, 1, Uart16550.FCR_ENABLE);
        assertEquals(Uart16550.IIR_FIFO_ENABLED | Uart16550.IIR_NO_INT, u.in(B + Uart16550.IIR_FCR, 1));
    }

    @Test
    void uartLoopbackReflectsModemControlAsThe8250ProbeExpects() {
        Uart16550 u = new Uart16550(new ByteArrayOutputStream(), IrqLine.NONE);
        u.out(B + Uart16550.MCR, 1, Uart16550.MCR_LOOP | 0x0a); // RTS | OUT2
        assertEquals(0x90, u.in(B + Uart16550.MSR, 1) & 0xf0);
        u.out(B + Uart16550.RBR_THR, 1, 0x5a);
        assertEquals(Uart16550.LSR_DR, u.in(B + Uart16550.LSR, 1) & Uart16550.LSR_DR);
        assertEquals(0x5a, u.in(B + Uart16550.RBR_THR, 1));
        // divisor latch
        u.out(B + Uart16550.LCR, 1, Uart16550.LCR_DLAB);
        u.out(B, 1, 1);
        assertEquals(1, u.in(B, 1));
        assertEquals(Uart16550.LCR_DLAB, u.in(B + Uart16550.LCR, 1));
    }

    private static Pic8259 initialisedPic() {
        Pic8259 p = new Pic8259();
        // Linux's init_8259A: ICW1 0x11, ICW2 vector base, ICW3 cascade, ICW4 8086 mode
        p.out(0x20, 1, 0x11); p.out(0x21, 1, 0x30); p.out(0x21, 1, 0x04); p.out(0x21, 1, 0x01);
        p.out(0xa0, 1, 0x11); p.out(0xa1, 1, 0x38); p.out(0xa1, 1, 0x02); p.out(0xa1, 1, 0x01);
        p.out(0x21, 1, 0x00); p.out(0xa1, 1, 0x00);
        return p;
    }

    @Test
    void picMasksPrioritisesAndNeedsEoi() {
        Pic8259 p = initialisedPic();
        p.out(0x21, 1, 0x01); // mask IRQ 0
        p.setLine(0, true);
        assertFalse(p.interruptAsserted(), "masked");
        p.setLine(4, true);
        assertTrue(p.interruptAsserted());
        assertEquals(0x34, p.acknowledge());
        p.setLine(4, false);
        p.setLine(4, true);
        assertFalse(p.interruptAsserted(), "IRQ 4 in service blocks itself until EOI");
        p.out(0x20, 1, 0x0b); // OCW3: read ISR
        assertEquals(0x10, p.in(0x20, 1));
        p.out(0x20, 1, 0x60 | 4); // specific EOI
        assertTrue(p.interruptAsserted());
        p.out(0x21, 1, 0x00); // unmask IRQ 0: higher priority than 4
        assertEquals(0x30, p.acknowledge());
        p.out(0x20, 1, 0x20); // non-specific EOI clears IRQ 0
        assertEquals(0x34, p.acknowledge());
        p.out(0x21, 1, 0xfe);
        assertEquals(0xfe, p.in(0x21, 1), "IMR reads back (Linux probes the PIC this way)");
    }

    @Test
    void picSlaveCascadesThroughIrq2() {
        Pic8259 p = initialisedPic();
        p.setLine(9, true);
        assertTrue(p.interruptAsserted());
        assertEquals(0x39, p.acknowledge());
        p.out(0xa0, 1, 0x20);
        p.out(0x20, 1, 0x20);
        assertFalse(p.interruptAsserted());
        p.out(0x4d1, 1, 0x02); // IRQ 9 level-triggered
        assertEquals(0x02, p.in(0x4d1, 1));
    }

    @Test
    void pitRateGeneratorFiresPeriodicallyAndCountsDown() {
        VirtualClock clock = new VirtualClock(1_000_000_000L);
        int[] edges = {0};
        Pit8254 pit = new Pit8254(clock, level -> { if (level) edges[0]++; });
        pit.out(Pit8254.MODE, 1, 0x34); // channel 0, lo/hi, mode 2
        pit.out(Pit8254.CH0, 1, 1193 & 0xff);
        pit.out(Pit8254.CH0, 1, 1193 >> 8); // ~1 ms period
        assertEquals(1193, pit.count(0));
        clock.advance(500_000); // 0.5 ms
        int c = pit.count(0);
        assertTrue(c > 590 && c < 600, "count after half a period: " + c);
        pit.out(Pit8254.MODE, 1, 0x00); // latch channel 0
        clock.advance(100_000);
        int lo = pit.in(Pit8254.CH0, 1), hi = pit.in(Pit8254.CH0, 1);
        assertEquals(c, lo | hi << 8, "latched value does not move");
        clock.advance(10_000_000 - 600_000);
        clock.fireDue();
        assertEquals(10, edges[0], "10 ms at ~1 kHz");
    }

    @Test
    void pitOneShotFiresOnceAndSquareWaveHalvesTheCount() {
        VirtualClock clock = new VirtualClock(1_000_000_000L);
        int[] edges = {0};
        Pit8254 pit = new Pit8254(clock, level -> { if (level) edges[0]++; });
        pit.out(Pit8254.MODE, 1, 0x30); // mode 0
        pit.out(Pit8254.CH0, 1, 0x00);
        pit.out(Pit8254.CH0, 1, 0x10); // 4096 ticks = 3.43 ms
        clock.advance(3_000_000);
        clock.fireDue();
        assertEquals(0, edges[0]);
        clock.advance(1_000_000);
        clock.fireDue();
        assertEquals(1, edges[0]);
        clock.advance(100_000_000);
        clock.fireDue();
        assertEquals(1, edges[0], "one-shot");
        // channel 2 in mode 3 with the gate on port 0x61: OUT2 high for the first half
        pit.out(Pit8254.PORT_B, 1, Pit8254.PORTB_GATE2);
        pit.out(Pit8254.MODE, 1, 0xb6);
        pit.out(Pit8254.CH2, 1, 0xe8);
        pit.out(Pit8254.CH2, 1, 0x03); // 1000 ticks
        assertTrue((pit.in(Pit8254.PORT_B, 1) & Pit8254.PORTB_OUT2) != 0);
        clock.advance(600_000); // 716 ticks: second half, output low
        assertEquals(0, pit.in(Pit8254.PORT_B, 1) & Pit8254.PORTB_OUT2);
    }

    @Test
    void cmosReportsVirtualTimeInBcdAndBinary() {
        VirtualClock clock = new VirtualClock(1_000_000_000L);
        CmosRtc rtc = new CmosRtc(clock, CmosRtc.DEFAULT_EPOCH_SECONDS); // 2025-01-01 00:00:00
        clock.advance(3_723_000_000_000L); // +1 h 2 min 3 s
        rtc.out(0x70, 1, CmosRtc.HOURS);
        assertEquals(0x01, rtc.in(0x71, 1));
        rtc.out(0x70, 1, CmosRtc.MINUTES);
        assertEquals(0x02, rtc.in(0x71, 1));
        rtc.out(0x70, 1, CmosRtc.YEAR);
        assertEquals(0x25, rtc.in(0x71, 1));
        rtc.out(0x70, 1, CmosRtc.CENTURY);
        assertEquals(0x20, rtc.in(0x71, 1));
        rtc.out(0x70, 1, CmosRtc.STATUS_B);
        rtc.out(0x71, 1, CmosRtc.B_24H | CmosRtc.B_BINARY);
        rtc.out(0x70, 1, CmosRtc.YEAR);
        assertEquals(25, rtc.in(0x71, 1));
        rtc.out(0x70, 1, CmosRtc.STATUS_D);
        assertEquals(CmosRtc.D_VRT, rtc.in(0x71, 1));
    }

    @Test
    void acpiPmTimerCountsAndSlpEnWithS5PowersOff() {
        VirtualClock clock = new VirtualClock(1_000_000_000L);
        boolean[] off = {false};
        AcpiPm pm = new AcpiPm(0x600, clock, () -> off[0] = true);
        clock.advance(1_000_000_000L);
        assertEquals(3_579_545, pm.in(0x608, 4));
        assertEquals(AcpiPm.PM1_CNT_SCI_EN, pm.in(0x604, 2) & AcpiPm.PM1_CNT_SCI_EN, "always in ACPI mode");
        pm.out(0x604, 2, AcpiPm.PM1_CNT_SLP_EN); // S0 type: not power-off
        assertFalse(off[0]);
        pm.out(0x604, 2, (AcpiPm.SLP_TYP_S5 << AcpiPm.PM1_CNT_SLP_TYP_SHIFT) | AcpiPm.PM1_CNT_SLP_EN);
        assertTrue(off[0]);
    }

    @Test
    void resetPortsRequestReset() {
        int[] resets = {0};
        ResetControl r = new ResetControl(() -> resets[0]++);
        assertEquals(0xff, r.in(ResetControl.KBD_STATUS_CMD, 1), "no 8042: reads as 0xff");
        r.out(ResetControl.KBD_STATUS_CMD, 1, ResetControl.KBD_CMD_PULSE_RESET);
        r.out(ResetControl.RESET_CONTROL, 1, ResetControl.RCR_SYS_RESET | ResetControl.RCR_RESET_CPU);
        assertEquals(2, resets[0]);
    }
}
