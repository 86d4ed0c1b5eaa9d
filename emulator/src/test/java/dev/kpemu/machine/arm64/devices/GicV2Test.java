package dev.kpemu.machine.arm64.devices;

import static dev.kpemu.machine.arm64.devices.GicV2.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.InterruptController;

class GicV2Test {
    /** A GIC as Linux sets it up: distributor and CPU interface on, PMR 0xf0, priority 0xa0 everywhere. */
    static GicV2 linuxLike(int... enabledIds) {
        GicV2 g = new GicV2();
        for (int i = 0; i < NUM_IRQS; i += 4) g.distWrite(GICD_IPRIORITYR + i, 4, 0xa0a0a0a0L);
        for (int i = SPI_BASE; i < NUM_IRQS; i += 4) g.distWrite(GICD_ITARGETSR + i, 4, 0x0101_0101L);
        for (int id : enabledIds) g.distWrite(GICD_ISENABLER + 4 * (id / 32), 4, 1L << (id % 32));
        g.distWrite(GICD_CTLR, 4, 1);
        g.cpuWrite(GICC_PMR, 0xf0);
        g.cpuWrite(GICC_CTLR, GICC_CTLR_ENABLE);
        return g;
    }

    @Test
    void identificationRegisters() {
        GicV2 g = new GicV2();
        assertEquals(3, g.distRead(GICD_TYPER, 4) & 0x1f, "ITLinesNumber: 128 interrupts");
        assertEquals(0, (g.distRead(GICD_TYPER, 4) >> 5) & 7, "one CPU");
        assertEquals(0x0200043bL, g.distRead(GICD_IIDR, 4));
        assertEquals(0x0202043bL, g.cpuRead(GICC_IIDR));
        assertEquals(0x0101_0101L, g.distRead(GICD_ITARGETSR, 4), "SGI targets read as this CPU (Linux's gic_get_cpumask)");
        assertEquals(0x2b, g.distRead(0xfe8, 4), "ICPIDR2: GICv2");
    }

    @Test
    void levelInterruptAcknowledgeAndEnd() {
        int[] asserts = {0};
        GicV2 g = linuxLike(27, 33);
        g.onAssert(() -> asserts[0]++);
        assertFalse(g.interruptAsserted());
        assertEquals(SPURIOUS, g.cpuRead(GICC_IAR));
        g.setLine(27, true);
        assertTrue(g.interruptAsserted());
        assertEquals(1, asserts[0]);
        assertEquals(1L << 27, g.distRead(GICD_ISPENDR, 4), "pending while the line is high");
        assertEquals(27, g.cpuRead(GICC_HPPIR));
        assertEquals(27, g.cpuRead(GICC_IAR));
        assertTrue(g.isActive(27));
        assertEquals(0xa0, g.cpuRead(GICC_RPR), "running priority");
        assertFalse(g.interruptAsserted(), "active interrupt is not signalled again");
        g.setLine(27, false);
        g.cpuWrite(GICC_EOIR, 27);
        assertFalse(g.isActive(27));
        assertEquals(0xff, g.cpuRead(GICC_RPR), "idle");
        assertFalse(g.interruptAsserted());
    }

    @Test
    void acknowledgeThroughTheControllerInterfaceIsAnIarRead() {
        GicV2 g = linuxLike(33);
        InterruptController ic = g;
        ic.line(33).set(true);
        assertTrue(ic.interruptAsserted());
        assertEquals(33, ic.acknowledge());
        assertTrue(g.isActive(33));
        assertEquals(0xa0, g.cpuRead(GICC_RPR), "running priority, as after GICC_IAR");
        assertEquals(SPURIOUS, ic.acknowledge(), "the active interrupt is not handed over twice");
        assertEquals(1, g.acknowledged());
    }

    @Test
    void levelStillHighAfterEoiIsPendingAgain() {
        GicV2 g = linuxLike(33);
        g.setLine(33, true);
        assertEquals(33, g.cpuRead(GICC_IAR));
        g.cpuWrite(GICC_EOIR, 33);
        assertTrue(g.interruptAsserted(), "line still high");
        assertEquals(33, g.cpuRead(GICC_IAR));
    }

    @Test
    void sharedPeripheralInterruptsGoWhereTheirTargetSays() {
        GicV2 g = new GicV2();
        g.distWrite(GICD_ISENABLER + 4, 4, 2);
        g.distWrite(GICD_CTLR, 4, 1);
        g.cpuWrite(GICC_PMR, 0xff);
        g.cpuWrite(GICC_CTLR, 1);
        g.setLine(33, true);
        assertFalse(g.interruptAsserted(), "SPI targets reset to no CPU");
        g.distWrite(GICD_ITARGETSR + 33, 1, 1);
        assertEquals(0x100, g.distRead(GICD_ITARGETSR + 32, 4));
        assertTrue(g.interruptAsserted());
        g.distWrite(GICD_ITARGETSR, 4, 0);
        assertEquals(0x0101_0101L, g.distRead(GICD_ITARGETSR, 4), "SGI/PPI targets are read-only");
    }

    @Test
    void edgeInterruptLatchesUntilAcknowledged() {
        GicV2 g = linuxLike(40);
        g.distWrite(GICD_ICFGR + 8, 4, 2L << 16);     // ID 40: edge
        assertEquals(2L << 16, g.distRead(GICD_ICFGR + 8, 4));
        g.setLine(40, true);
        g.setLine(40, false);
        assertTrue(g.interruptAsserted(), "edge latched");
        assertEquals(40, g.cpuRead(GICC_IAR));
        assertFalse(g.isPending(40));
        g.cpuWrite(GICC_EOIR, 40);
        assertFalse(g.interruptAsserted());
    }

    @Test
    void enablesPriorityMaskAndPreemption() {
        GicV2 g = linuxLike();
        g.setLine(33, true);
        assertFalse(g.interruptAsserted(), "disabled");
        g.distWrite(GICD_ISENABLER + 4, 4, 1L << 1);
        assertTrue(g.isEnabled(33));
        assertEquals(2, g.distRead(GICD_ICENABLER + 4, 4), "ICENABLER reads the enable bits");
        assertTrue(g.interruptAsserted());
        g.cpuWrite(GICC_PMR, 0xa0);
        assertFalse(g.interruptAsserted(), "priority 0xa0 is not below PMR 0xa0");
        g.cpuWrite(GICC_PMR, 0xf0);
        g.distWrite(GICD_ICENABLER + 4, 4, 1L << 1);
        assertFalse(g.interruptAsserted());
        g.distWrite(GICD_ISENABLER + 4, 4, 1L << 1);
        // Preemption: a higher-priority interrupt is signalled while 33 is active, a lower one is not.
        assertEquals(33, g.cpuRead(GICC_IAR));
        g.distWrite(GICD_ISENABLER + 4, 4, (1L << 2) | (1L << 3));
        g.distWrite(GICD_IPRIORITYR + 34, 1, 0x80);
        g.distWrite(GICD_IPRIORITYR + 35, 1, 0xc0);
        assertEquals(0xc080a0a0L, g.distRead(GICD_IPRIORITYR + 32, 4), "byte access");
        g.distWrite(GICD_ISPENDR + 4, 4, (1L << 2) | (1L << 3));
        assertEquals(34, g.cpuRead(GICC_IAR));
        assertEquals(0x80, g.cpuRead(GICC_RPR));
        g.cpuWrite(GICC_EOIR, 34);
        assertEquals(0xa0, g.cpuRead(GICC_RPR), "back to 33's priority");
        assertEquals(SPURIOUS, g.cpuRead(GICC_IAR), "35 (0xc0) cannot preempt 33 (0xa0)");
        g.setLine(33, false);
        g.cpuWrite(GICC_EOIR, 33);
        assertEquals(35, g.cpuRead(GICC_IAR));
    }

    @Test
    void softwareGeneratedInterruptToSelf() {
        GicV2 g = linuxLike(5);
        g.distWrite(GICD_SGIR, 4, (1L << 16) | 5);         // target list: CPU 0
        assertTrue(g.isPending(5));
        assertEquals(1L << 8, g.distRead(GICD_SPENDSGIR + 4, 4), "pending from CPU 0");
        assertEquals(5, g.cpuRead(GICC_IAR));
        g.cpuWrite(GICC_EOIR, 5);
        g.distWrite(GICD_SGIR, 4, (1L << 24) | 5);         // filter 1: all but self
        assertFalse(g.isPending(5));
        g.distWrite(GICD_SGIR, 4, (2L << 24) | 5);         // filter 2: self
        assertTrue(g.isPending(5));
    }

    @Test
    void splitPriorityDropAndDeactivate() {
        GicV2 g = linuxLike(33);
        g.cpuWrite(GICC_CTLR, GICC_CTLR_ENABLE | GICC_CTLR_EOIMODE);
        g.setLine(33, true);
        assertEquals(33, g.cpuRead(GICC_IAR));
        g.cpuWrite(GICC_EOIR, 33);
        assertTrue(g.isActive(33), "EOImode 1: EOIR only drops priority");
        assertEquals(0xff, g.cpuRead(GICC_RPR));
        g.cpuWrite(GICC_DIR, 33);
        assertFalse(g.isActive(33));
    }

    @Test
    void disabledInterfacesSignalNothing() {
        GicV2 g = linuxLike(33);
        g.setLine(33, true);
        g.cpuWrite(GICC_CTLR, 0);
        assertFalse(g.interruptAsserted());
        g.cpuWrite(GICC_CTLR, 1);
        g.distWrite(GICD_CTLR, 4, 0);
        assertFalse(g.interruptAsserted());
    }
}
