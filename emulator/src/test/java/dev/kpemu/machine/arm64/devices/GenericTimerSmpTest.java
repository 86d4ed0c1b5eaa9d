package dev.kpemu.machine.arm64.devices;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.VirtualClock;
import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.SysRegs;

/**
 * One generic timer per PE (ARM ARM D11): each PE's CNTP/CNTV registers are its own, its timers
 * raise its own PPIs 30 and 27 on its own GIC CPU interface, and every PE reads the one counter
 * (62.5 MHz: a tick is 16 ns of guest time).
 */
class GenericTimerSmpTest {
    static final long RAM = Arm64Layout.RAM_BASE;

    /** A machine (not booted) with a GIC of {@code n} CPU interfaces and {@code n} PEs' timers. */
    record Rig(Arm64Machine machine, GicV2 gic, GenericTimer timer) implements AutoCloseable {
        static Rig of(int n) {
            Arm64Machine m = Arm64Machine.create(16L << 20);
            GicV2 gic = new GicV2(n);
            m.setInterruptController(gic);
            return new Rig(m, gic, new GenericTimer(m, n, gic::privateLine));
        }

        VirtualClock clock() { return machine.clock(); }

        /** Runs {@code ns} nanoseconds of guest time (1 ns per instruction) and fires what is due. */
        void pass(long ns) {
            clock().advance(ns);
            clock().fireDue();
        }

        @Override public void close() { machine.close(); }
    }

    @Test
    void eachPeHasItsOwnTimerRegisters() {
        try (Rig r = Rig.of(2)) {
            GenericTimer t = r.timer();
            assertEquals(2, t.pes());
            r.pass(1_000_000);                                           // 1 ms: counter 62,500
            assertTrue(t.write(1, SysRegs.CNTV_CVAL_EL0, 70_000));
            assertTrue(t.write(1, SysRegs.CNTV_CTL_EL0, GenericTimer.CTL_ENABLE));
            assertTrue(t.write(0, SysRegs.CNTP_TVAL_EL0, 100));
            assertEquals(70_000L, t.read(1, SysRegs.CNTV_CVAL_EL0));
            assertEquals(0L, t.read(0, SysRegs.CNTV_CVAL_EL0), "PE 0's virtual timer untouched");
            assertEquals(GenericTimer.CTL_ENABLE, t.read(1, SysRegs.CNTV_CTL_EL0));
            assertEquals(0L, t.read(0, SysRegs.CNTV_CTL_EL0));
            assertEquals(62_600L, t.read(0, SysRegs.CNTP_CVAL_EL0), "TVAL 100 from counter 62,500");
            assertEquals(0L, t.read(1, SysRegs.CNTP_CVAL_EL0));
            assertEquals(7_500L, t.read(1, SysRegs.CNTV_TVAL_EL0), "70,000 - 62,500");
            assertEquals(t.read(0, SysRegs.CNTVCT_EL0), t.read(1, SysRegs.CNTVCT_EL0), "one counter");
            assertEquals(62_500L, t.read(1, SysRegs.CNTPCT_EL0));
            assertEquals(GenericTimer.FREQUENCY_HZ, t.read(1, SysRegs.CNTFRQ_EL0));
            // The registers an access names without a PE are the current PE's.
            int[] pe = {1};
            t.setCurrentPe(() -> pe[0]);
            assertEquals(70_000L, t.read(SysRegs.CNTV_CVAL_EL0));
            assertEquals(70_000L, t.virtual().cval());
            pe[0] = 0;
            assertEquals(0L, t.read(SysRegs.CNTV_CVAL_EL0));
            assertEquals(62_600L, t.physical().cval());
            pe[0] = 2;
            assertThrows(IllegalStateException.class, () -> t.read(SysRegs.CNTV_CVAL_EL0));
        }
    }

    @Test
    void eachPesTimersFireTheirOwnPpisAtTheirCompareValues() {
        try (Rig r = Rig.of(2)) {
            GenericTimer t = r.timer();
            // PE 1's virtual timer at tick 625 (10,000 ns), PE 0's physical timer at tick 1,250 (20,000 ns).
            t.write(1, SysRegs.CNTV_CVAL_EL0, 625);
            t.write(1, SysRegs.CNTV_CTL_EL0, GenericTimer.CTL_ENABLE);
            t.write(0, SysRegs.CNTP_CVAL_EL0, 1_250);
            t.write(0, SysRegs.CNTP_CTL_EL0, GenericTimer.CTL_ENABLE);
            r.pass(9_999);
            assertFalse(r.gic().isPending(1, GenericTimer.PPI_VIRT), "one nanosecond early");
            assertEquals(0L, t.read(1, SysRegs.CNTV_CTL_EL0) & GenericTimer.CTL_ISTATUS);
            r.pass(1);
            assertEquals(10_000, r.clock().nanos());
            assertTrue(r.gic().isPending(1, GenericTimer.PPI_VIRT), "PE 1's PPI 27 on CPU interface 1");
            assertFalse(r.gic().isPending(0, GenericTimer.PPI_VIRT), "not CPU 0's");
            assertFalse(r.gic().isPending(0, GenericTimer.PPI_PHYS));
            assertTrue(t.virtual(1).interruptLine());
            assertEquals(GenericTimer.CTL_ENABLE | GenericTimer.CTL_ISTATUS, t.read(1, SysRegs.CNTV_CTL_EL0));
            r.pass(9_999);
            assertFalse(r.gic().isPending(0, GenericTimer.PPI_PHYS));
            r.pass(1);
            assertEquals(20_000, r.clock().nanos());
            assertTrue(r.gic().isPending(0, GenericTimer.PPI_PHYS), "PE 0's PPI 30 on CPU interface 0");
            assertFalse(r.gic().isPending(1, GenericTimer.PPI_PHYS));
            // IMASK on PE 1 lowers PE 1's line only.
            t.write(1, SysRegs.CNTV_CTL_EL0, GenericTimer.CTL_ENABLE | GenericTimer.CTL_IMASK);
            assertFalse(r.gic().isPending(1, GenericTimer.PPI_VIRT));
            assertTrue(r.gic().isPending(0, GenericTimer.PPI_PHYS));
            // Signalled to the CPU whose interface enables it.
            GicV2 g = r.gic();
            g.distWrite(0, GicV2.GICD_CTLR, 4, 1);
            g.cpuWrite(1, GicV2.GICC_PMR, 0xff);
            g.cpuWrite(1, GicV2.GICC_CTLR, 1);
            g.cpuWrite(0, GicV2.GICC_PMR, 0xff);
            g.cpuWrite(0, GicV2.GICC_CTLR, 1);
            g.distWrite(0, GicV2.GICD_ISENABLER, 4, 1L << GenericTimer.PPI_PHYS);
            assertTrue(g.interruptAsserted(0));
            assertFalse(g.interruptAsserted(1), "CPU 1 has not enabled its PPI 30, and its line is low");
        }
    }

    @Test
    void theGuestsMrsAndMsrReachTheCurrentPesRegisters() {
        String code = """
                movz x1, #0x1234
                msr cntv_cval_el0, x1
                mov x2, #1
                msr cntv_ctl_el0, x2
                mrs x3, cntv_cval_el0
                movz x0, #0x8400, lsl #16
                movk x0, #8
                hvc #0
                b .
                """;
        try (Rig r = Rig.of(2)) {
            r.pass(100_000);                                              // counter 6,250 > 0x1234
            r.timer().setCurrentPe(() -> 1);
            r.gic().setCurrentCpu(() -> 1);
            Arm64Machine m = r.machine();
            m.memory().write(RAM, Asm.arm64(code, 0));
            m.setReg(Arm64Reg.SP, RAM + 0x8000);
            m.setPc(RAM);
            assertInstanceOf(StopReason.PoweredOff.class, m.run(100_000));
            assertEquals(0x1234, r.timer().virtual(1).cval());
            assertEquals(GenericTimer.CTL_ENABLE | GenericTimer.CTL_ISTATUS, r.timer().virtual(1).ctl(), "enabled and expired");
            assertEquals(0, r.timer().virtual(0).cval(), "PE 0's untouched");
            assertEquals(0x1234, m.reg(Arm64Reg.X3));
            assertTrue(r.timer().virtual(1).interruptLine(), "0x1234 (4,660) is past");
            assertTrue(r.gic().isPending(1, GenericTimer.PPI_VIRT));
        }
    }

    @Test
    void snapshotRoundTripWithTwoPes() throws IOException {
        try (Rig r = Rig.of(2)) {
            GenericTimer t = r.timer();
            t.write(0, SysRegs.CNTV_CVAL_EL0, 100);                     // 1,600 ns
            t.write(0, SysRegs.CNTV_CTL_EL0, GenericTimer.CTL_ENABLE);
            t.write(1, SysRegs.CNTP_CVAL_EL0, 200);                     // 3,200 ns
            t.write(1, SysRegs.CNTP_CTL_EL0, GenericTimer.CTL_ENABLE);
            t.write(1, SysRegs.CNTV_CVAL_EL0, 5);
            t.write(1, SysRegs.CNTV_CTL_EL0, GenericTimer.CTL_ENABLE | GenericTimer.CTL_IMASK);
            r.pass(1_000);
            byte[] state = save(t);

            t.reset();                                                    // cancels both events
            assertEquals(0, t.physical(1).cval());
            t.restoreState(new DataInputStream(new ByteArrayInputStream(state)));
            assertArrayEquals(state, save(t));
            assertEquals(200, t.physical(1).cval());
            assertEquals(GenericTimer.CTL_ENABLE | GenericTimer.CTL_IMASK | GenericTimer.CTL_ISTATUS, t.virtual(1).ctl());
            assertEquals(GenericTimer.CTL_ENABLE, t.virtual(0).ctl(), "not yet expired at 1,000 ns");
            // The restored events fire at the same guest times, on the same PEs' PPIs.
            r.pass(599);
            assertFalse(r.gic().isPending(0, GenericTimer.PPI_VIRT));
            r.pass(1);
            assertTrue(r.gic().isPending(0, GenericTimer.PPI_VIRT), "1,600 ns: PE 0's virtual timer");
            assertFalse(r.gic().isPending(1, GenericTimer.PPI_VIRT), "PE 1's is masked");
            r.pass(1_599);
            assertFalse(r.gic().isPending(1, GenericTimer.PPI_PHYS));
            r.pass(1);
            assertTrue(r.gic().isPending(1, GenericTimer.PPI_PHYS), "3,200 ns: PE 1's physical timer");
            assertFalse(r.gic().isPending(0, GenericTimer.PPI_PHYS));
        }
    }

    @Test
    void onePeKeepsItsSnapshotLayout() throws IOException {
        try (Rig r = Rig.of(1)) {
            // Two timers x (CTL, CVAL, line, no pending event) + the access count.
            assertEquals(2 * (8 + 8 + 1 + 1) + 8, save(r.timer()).length);
        }
    }

    static byte[] save(GenericTimer t) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        t.saveState(new DataOutputStream(b));
        return b.toByteArray();
    }
}
