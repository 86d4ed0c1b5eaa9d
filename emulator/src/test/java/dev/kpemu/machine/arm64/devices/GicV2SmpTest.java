package dev.kpemu.machine.arm64.devices;

import static dev.kpemu.machine.arm64.devices.GicV2.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * The GICv2 with several CPU interfaces (IHI 0048B): banked SGI/PPI state, GICD_SGIR's filters
 * and the source CPU in GICC_IAR, SPI routing by GICD_ITARGETSR, per-CPU priority masking and EOI.
 * Expected values are the specification's (section numbers of IHI 0048B next to them).
 */
class GicV2SmpTest {
    /** Linux's set-up on every CPU: distributor on, each CPU interface on with PMR 0xf0, priority 0xa0 everywhere. */
    static GicV2 linuxLike(int cpus) {
        GicV2 g = new GicV2(cpus);
        for (int c = 0; c < cpus; c++) {
            for (int i = 0; i < (c == 0 ? NUM_IRQS : SPI_BASE); i += 4) g.distWrite(c, GICD_IPRIORITYR + i, 4, 0xa0a0a0a0L);
            g.cpuWrite(c, GICC_PMR, 0xf0);
            g.cpuWrite(c, GICC_CTLR, GICC_CTLR_ENABLE);
        }
        g.distWrite(0, GICD_CTLR, 4, 1);
        return g;
    }

    static int sgir(int filter, int targets, int sgi) { return filter << 24 | targets << 16 | sgi; }

    @Test
    void typerCountsTheCpuInterfacesAndItargetsr0To7ReadTheReadersBit() {
        for (int n = 1; n <= MAX_CPUS; n++) {
            GicV2 g = new GicV2(n);
            // 4.3.2: CPUNumber, bits 7:5, is the number of implemented CPU interfaces minus one.
            assertEquals(n - 1, (g.distRead(0, GICD_TYPER, 4) >> 5) & 7, "CPUNumber for " + n);
            assertEquals(3, g.distRead(0, GICD_TYPER, 4) & 0x1f, "ITLinesNumber unchanged");
        }
        GicV2 g = new GicV2(4);
        // 4.3.12: ITARGETSR0-7 are read-only, each field returns the reading CPU's own bit.
        assertEquals(0x0101_0101L, g.distRead(0, GICD_ITARGETSR, 4));
        assertEquals(0x0202_0202L, g.distRead(1, GICD_ITARGETSR + 16, 4));
        assertEquals(0x0808_0808L, g.distRead(3, GICD_ITARGETSR + 28, 4));
        assertEquals(0x04, g.distRead(2, GICD_ITARGETSR + 27, 1));
        g.distWrite(2, GICD_ITARGETSR + 28, 4, 0x0f0f_0f0fL);
        assertEquals(0x0404_0404L, g.distRead(2, GICD_ITARGETSR + 28, 4), "read-only");
        assertThrows(IllegalArgumentException.class, () -> new GicV2(0));
        assertThrows(IllegalArgumentException.class, () -> new GicV2(9));
    }

    @Test
    void sgiAndPpiEnablePendingActiveAndPriorityAreBankedPerCpu() {
        GicV2 g = new GicV2(2);
        g.distWrite(0, GICD_CTLR, 4, 1);
        for (int c = 0; c < 2; c++) {
            g.cpuWrite(c, GICC_PMR, 0xff);
            g.cpuWrite(c, GICC_CTLR, 1);
        }
        // 4.3.5: ISENABLER0 is banked; ISENABLER1 (SPIs 32-63) is not.
        g.distWrite(1, GICD_ISENABLER, 4, 1L << 27 | 1L << 3);
        g.distWrite(1, GICD_ISENABLER + 4, 4, 1L << 1);
        assertEquals(1L << 27 | 1L << 3, g.distRead(1, GICD_ISENABLER, 4));
        assertEquals(0, g.distRead(0, GICD_ISENABLER, 4), "CPU 0's SGIs/PPIs untouched");
        assertEquals(2, g.distRead(0, GICD_ISENABLER + 4, 4), "SPI enables are shared");
        // 4.3.11: IPRIORITYR0-7 are banked.
        g.distWrite(1, GICD_IPRIORITYR + 24, 4, 0x4000_0000L);     // ID 27 on CPU 1: 0x40
        g.distWrite(0, GICD_IPRIORITYR + 24, 4, 0xc000_0000L);     // ID 27 on CPU 0: 0xc0
        assertEquals(0x40, g.priority(1, 27));
        assertEquals(0xc0, g.priority(0, 27));
        assertEquals(0x4000_0000L, g.distRead(1, GICD_IPRIORITYR + 24, 4));
        // A PPI's input is the CPU's own: CPU 1's line 27 pends on CPU 1 only.
        g.privateLine(1, 27).set(true);
        assertEquals(1L << 27, g.distRead(1, GICD_ISPENDR, 4));
        assertEquals(0, g.distRead(0, GICD_ISPENDR, 4));
        assertTrue(g.interruptAsserted(1));
        assertFalse(g.interruptAsserted(0));
        assertEquals(SPURIOUS, g.cpuRead(0, GICC_IAR));
        assertEquals(27, g.cpuRead(1, GICC_IAR));
        assertEquals(0x40, g.cpuRead(1, GICC_RPR), "running priority from CPU 1's bank");
        // 4.3.8: ISACTIVER0 is banked.
        assertEquals(1L << 27, g.distRead(1, GICD_ISACTIVER, 4));
        assertEquals(0, g.distRead(0, GICD_ISACTIVER, 4));
        // CPU 0's own line 27 (enabled there now) is independent of CPU 1's.
        g.distWrite(0, GICD_ISENABLER, 4, 1L << 27);
        g.setLine(27, true);                                        // InterruptController: CPU 0's PPI
        assertTrue(g.isPending(0, 27));
        assertTrue(g.interruptAsserted(0));
        assertEquals(27, g.cpuRead(0, GICC_IAR));
        assertEquals(0xc0, g.cpuRead(0, GICC_RPR));
        // ICENABLER0 by CPU 0 leaves CPU 1's enables.
        g.distWrite(0, GICD_ICENABLER, 4, 1L << 27);
        assertFalse(g.isEnabled(0, 27));
        assertTrue(g.isEnabled(1, 27));
        assertThrows(IllegalArgumentException.class, () -> g.privateLine(0, 33), "SPIs are not per-CPU lines");
        assertThrows(IllegalArgumentException.class, () -> g.privateLine(2, 27), "no CPU 2");
    }

    @Test
    void sgirTargetFiltersAndTheSourceCpuInIar() {
        GicV2 g = linuxLike(4);
        for (int c = 0; c < 4; c++) g.distWrite(c, GICD_ISENABLER, 4, 0xffff);
        // 4.3.15: filter 0 = the target list, CPU 1 sends SGI 5 to CPUs 0 and 2.
        g.distWrite(1, GICD_SGIR, 4, sgir(SGIR_TARGET_LIST, 0b0101, 5));
        assertTrue(g.isPending(0, 5));
        assertFalse(g.isPending(1, 5));
        assertTrue(g.isPending(2, 5));
        assertFalse(g.isPending(3, 5));
        // filter 1 = all but the sender: CPU 2 sends SGI 5 to 0, 1, 3.
        g.distWrite(2, GICD_SGIR, 4, sgir(SGIR_ALL_BUT_SELF, 0xff, 5));
        assertTrue(g.isPending(1, 5));
        assertTrue(g.isPending(3, 5));
        assertEquals(1 << 1, g.sgiSources(2, 5), "CPU 2 did not send to itself");
        // filter 2 = the sender only (the target list is ignored).
        g.distWrite(3, GICD_SGIR, 4, sgir(SGIR_SELF, 0b0001, 7));
        assertTrue(g.isPending(3, 7));
        assertFalse(g.isPending(0, 7));
        // 4.3.16: SPENDSGIRn, one byte per SGI, one bit per source CPU: SGI 5 is byte 1 of SPENDSGIR1.
        assertEquals(0b0110L << 8, g.distRead(0, GICD_SPENDSGIR + 4, 4), "CPU 0: SGI 5 from CPUs 1 and 2");
        assertEquals(0b0100L << 8, g.distRead(1, GICD_SPENDSGIR + 4, 4), "CPU 1: SGI 5 from CPU 2");
        assertEquals(0b1000L << 24 | 0b0100L << 8, g.distRead(3, GICD_SPENDSGIR + 4, 4), "CPU 3: SGI 7 from itself, SGI 5 from CPU 2");
        // 4.4.4: IAR's CPUID (bits 12:10) names the source; each source is taken once.
        assertEquals(5 | 1 << 10, g.cpuRead(0, GICC_HPPIR), "HPPIR shows the source too (4.4.8)");
        assertEquals(5 | 1 << 10, g.cpuRead(0, GICC_IAR));
        assertTrue(g.isPending(0, 5), "still pending from CPU 2");
        assertTrue(g.isActive(0, 5));
        assertEquals(SPURIOUS, g.cpuRead(0, GICC_IAR), "active and pending: not signalled again");
        g.cpuWrite(0, GICC_EOIR, 5 | 1 << 10);
        assertEquals(5 | 2 << 10, g.cpuRead(0, GICC_IAR));
        assertFalse(g.isPending(0, 5));
        g.cpuWrite(0, GICC_EOIR, 5 | 2 << 10);
        assertFalse(g.isActive(0, 5));
        // CPU 3: SGI 5 from CPU 2 and SGI 7 from itself, both 0xa0. Equal priorities: the lower ID
        // first, as QEMU chooses (the architecture leaves the choice to the implementation).
        assertEquals(5 | 2 << 10, g.cpuRead(3, GICC_IAR));
        g.cpuWrite(3, GICC_EOIR, 5 | 2 << 10);
        assertEquals(7 | 3 << 10, g.cpuRead(3, GICC_IAR));
    }

    @Test
    void sgiToCpusThatDoNotExistAndTheReservedFilterSendNothing() {
        GicV2 g = linuxLike(2);
        g.distWrite(0, GICD_ISENABLER, 4, 0xffff);
        g.distWrite(1, GICD_ISENABLER, 4, 0xffff);
        g.distWrite(0, GICD_SGIR, 4, sgir(SGIR_TARGET_LIST, 0b1111_1100, 3));
        g.distWrite(0, GICD_SGIR, 4, sgir(3, 0xff, 3));
        assertFalse(g.isPending(0, 3));
        assertFalse(g.isPending(1, 3));
        // SPENDSGIR / CPENDSGIR by the target CPU: bits of CPUs that do not exist stay clear.
        g.distWrite(1, GICD_SPENDSGIR, 4, 0xff_0000L);                // SGI 2 from "all"
        assertEquals(0b11, g.sgiSources(1, 2));
        g.distWrite(1, GICD_CPENDSGIR, 4, 0x01_0000L);                // clear source 0
        assertEquals(0b10, g.sgiSources(1, 2));
        assertTrue(g.isPending(1, 2));
        assertEquals(2 | 1 << 10, g.cpuRead(1, GICC_IAR));
    }

    @Test
    void sharedInterruptsGoToTheCpusTheirTargetByteNames() {
        GicV2 g = linuxLike(2);
        g.distWrite(0, GICD_ISENABLER + 4, 4, 1L << 8);               // ID 40
        g.setLine(40, true);
        assertFalse(g.interruptAsserted(0), "4.3.12: SPI targets reset to no CPU");
        assertFalse(g.interruptAsserted(1));
        g.distWrite(0, GICD_ITARGETSR + 40, 1, 0b10);
        assertEquals(0b10L, g.distRead(1, GICD_ITARGETSR + 40, 1), "SPI targets are not banked");
        assertFalse(g.interruptAsserted(0));
        assertTrue(g.interruptAsserted(1));
        g.distWrite(1, GICD_ITARGETSR + 40, 1, 0b01);
        assertTrue(g.interruptAsserted(0));
        assertFalse(g.interruptAsserted(1));
        // 1-N model (1.4.3): both may take it, the first acknowledge makes it active for both.
        g.distWrite(1, GICD_ITARGETSR + 40, 1, 0b11);
        assertTrue(g.interruptAsserted(0));
        assertTrue(g.interruptAsserted(1));
        assertEquals(40, g.cpuRead(1, GICC_IAR));
        assertFalse(g.interruptAsserted(0));
        assertEquals(SPURIOUS, g.cpuRead(0, GICC_IAR));
        assertEquals(1L << 8, g.distRead(0, GICD_ISACTIVER + 4, 4), "SPI active state is shared");
        g.setLine(40, false);
        g.cpuWrite(0, GICC_EOIR, 40);
        assertTrue(g.isActive(0, 40), "CPU 0 never acknowledged 40: its EOI does nothing");
        g.cpuWrite(1, GICC_EOIR, 40);
        assertFalse(g.isActive(1, 40));
        assertFalse(g.interruptAsserted(0) || g.interruptAsserted(1));
    }

    @Test
    void priorityMaskRunningPriorityAndEoiArePerCpu() {
        GicV2 g = linuxLike(2);
        g.distWrite(0, GICD_ISENABLER + 4, 4, 1L << 1 | 1L << 2);      // IDs 33, 34
        g.distWrite(0, GICD_ITARGETSR + 32, 4, 0x0003_0300L);          // 33 and 34 to both CPUs
        g.distWrite(0, GICD_IPRIORITYR + 33, 1, 0x80);
        g.distWrite(0, GICD_IPRIORITYR + 34, 1, 0x60);
        g.cpuWrite(0, GICC_PMR, 0x80);
        assertEquals(0x80, g.cpuRead(0, GICC_PMR));
        assertEquals(0xf0, g.cpuRead(1, GICC_PMR), "PMR is per CPU interface");
        g.setLine(33, true);
        assertFalse(g.interruptAsserted(0), "4.4.2: 0x80 is not higher than CPU 0's mask 0x80");
        assertTrue(g.interruptAsserted(1));
        assertEquals(33, g.cpuRead(1, GICC_IAR));
        assertEquals(0x80, g.cpuRead(1, GICC_RPR));
        assertEquals(0xff, g.cpuRead(0, GICC_RPR), "CPU 0 idle");
        // 34 (0x60) preempts on CPU 1 and passes CPU 0's mask; CPU 0 takes it first.
        g.setLine(34, true);
        assertTrue(g.interruptAsserted(0));
        assertEquals(34, g.cpuRead(0, GICC_IAR));
        assertEquals(0x60, g.cpuRead(0, GICC_RPR));
        assertFalse(g.interruptAsserted(1), "34 is active on CPU 0 (1-N)");
        g.setLine(34, false);
        g.cpuWrite(0, GICC_EOIR, 34);
        assertEquals(0xff, g.cpuRead(0, GICC_RPR));
        assertEquals(0x80, g.cpuRead(1, GICC_RPR), "CPU 0's EOI leaves CPU 1's running priority");
        g.setLine(33, false);
        g.cpuWrite(1, GICC_EOIR, 33);
        assertEquals(0xff, g.cpuRead(1, GICC_RPR));
        // EOImode and BPR are per CPU interface too.
        g.cpuWrite(1, GICC_CTLR, GICC_CTLR_ENABLE | GICC_CTLR_EOIMODE);
        g.cpuWrite(1, GICC_BPR, 5);
        assertEquals(GICC_CTLR_ENABLE, g.cpuRead(0, GICC_CTLR));
        assertEquals(2, g.cpuRead(0, GICC_BPR));
        assertEquals(5, g.cpuRead(1, GICC_BPR));
        g.setLine(33, true);
        assertEquals(33, g.cpuRead(1, GICC_IAR));
        g.cpuWrite(1, GICC_EOIR, 33);
        assertTrue(g.isActive(1, 33), "EOImode 1 on CPU 1: priority drop only");
        g.cpuWrite(1, GICC_DIR, 33);
        assertFalse(g.isActive(1, 33));
        // A disabled CPU interface signals nothing, the other keeps going.
        g.cpuWrite(1, GICC_CTLR, 0);
        g.cpuWrite(0, GICC_PMR, 0xf0);
        assertFalse(g.interruptAsserted(1));
        assertTrue(g.interruptAsserted(0));
    }

    @Test
    void theMmioWindowsAndTheControllerInterfaceServeTheCurrentCpu() {
        GicV2 g = linuxLike(2);
        int[] current = {1};
        g.setCurrentCpu(() -> current[0]);
        List<Integer> woken = new ArrayList<>();
        int[] asserts = {0};
        g.onCpuAssert(woken::add);
        g.onAssert(() -> asserts[0]++);
        assertEquals(0x0202_0202L, g.distributor().read(GICD_ITARGETSR, 4));
        g.distributor().write(GICD_ISENABLER, 4, 1L << 30);            // CPU 1's PPI 30
        assertTrue(g.isEnabled(1, 30));
        assertFalse(g.isEnabled(0, 30));
        g.setPrivateLine(1, 30, true);
        assertEquals(List.of(1), woken, "CPU 1's output went up");
        assertEquals(1, asserts[0]);
        assertTrue(g.interruptAsserted(), "asked for CPU 1");
        current[0] = 0;
        assertFalse(g.interruptAsserted(), "asked for CPU 0");
        assertEquals(SPURIOUS, g.acknowledge());
        current[0] = 1;
        assertEquals(30, g.cpuInterface().read(GICC_IAR, 4));
        assertTrue(g.isActive(30));
        g.cpuInterface().write(GICC_EOIR, 4, 30);
        assertFalse(g.isActive(1, 30));
        // SGIR through the window: the sender is the current CPU.
        g.distributor().write(GICD_ISENABLER, 4, 0xffff);
        current[0] = 0;
        g.distributor().write(GICD_ISENABLER, 4, 0xffff);
        woken.clear();
        g.distributor().write(GICD_SGIR, 4, sgir(SGIR_ALL_BUT_SELF, 0, 1));
        assertEquals(List.of(1), woken);
        current[0] = 1;
        assertEquals(1 | 0 << 10, g.acknowledge(), "SGI 1 from CPU 0");
        current[0] = 2;
        assertThrows(IllegalStateException.class, () -> g.distributor().read(GICD_CTLR, 4));
    }

    @Test
    void oneCpuNeverAsksTheSupplierAndKeepsItsSnapshotLayout() throws IOException {
        GicV2 g = GicV2Test.linuxLike(33);
        g.setCurrentCpu(() -> { throw new AssertionError("asked"); });
        g.setLine(33, true);
        assertEquals(1, g.distributor().read(GICD_ITARGETSR + 5, 1), "CPU 0's bit");
        assertEquals(33, g.cpuInterface().read(GICC_IAR, 4));
        assertEquals(0, g.distributor().read(GICD_TYPER, 4) >> 5 & 7);
        // The one-CPU layout: 5 x 128 booleans, 2 x 128 ints, the running stack (count + IDs),
        // GICD_CTLR, GICC_CTLR, PMR, BPR, the acknowledge count.
        byte[] state = save(g);
        assertEquals(5 * 128 + 2 * 128 * 4 + 4 + 4 + 4 * 4 + 8, state.length);
    }

    @Test
    void snapshotRoundTripWithTwoCpus() throws IOException {
        GicV2 g = linuxLike(2);
        for (int c = 0; c < 2; c++) g.distWrite(c, GICD_ISENABLER, 4, 0xffff_ffffL);
        g.distWrite(0, GICD_ISENABLER + 4, 4, 0xffff_ffffL);
        g.distWrite(0, GICD_ITARGETSR + 36, 4, 0x0201_0302L);
        g.distWrite(1, GICD_IPRIORITYR + 28, 4, 0x1020_3040L);
        g.distWrite(1, GICD_IPRIORITYR + 27, 1, 0x10);
        g.cpuWrite(1, GICC_PMR, 0xe0);
        g.cpuWrite(1, GICC_BPR, 4);
        g.privateLine(1, 27).set(true);
        g.distWrite(0, GICD_SGIR, 4, sgir(SGIR_TARGET_LIST, 0b11, 9));
        g.distWrite(1, GICD_SGIR, 4, sgir(SGIR_TARGET_LIST, 0b01, 9));
        g.setLine(37, true);
        assertEquals(9, g.cpuRead(0, GICC_IAR), "SGI 9 from CPU 0 (lowest source first)");
        assertEquals(27, g.cpuRead(1, GICC_IAR), "CPU 1's PPI 27 (priority 0x10 there)");

        byte[] state = save(g);
        GicV2 r = new GicV2(2);
        r.restoreState(new DataInputStream(new ByteArrayInputStream(state)));
        assertArrayEquals(state, save(r), "everything saved is restored");
        for (int c = 0; c < 2; c++) {
            for (int off : new int[] {GICD_ISENABLER, GICD_ISPENDR, GICD_ISACTIVER, GICD_IPRIORITYR + 28, GICD_ITARGETSR + 36,
                    GICD_SPENDSGIR + 8, GICD_TYPER}) {
                assertEquals(g.distRead(c, off, 4), r.distRead(c, off, 4), "CPU " + c + " offset 0x" + Integer.toHexString(off));
            }
            for (int off : new int[] {GICC_CTLR, GICC_PMR, GICC_BPR, GICC_RPR, GICC_HPPIR}) {
                assertEquals(g.cpuRead(c, off), r.cpuRead(c, off), "CPU " + c + " GICC 0x" + Integer.toHexString(off));
            }
        }
        assertEquals(0b10, r.sgiSources(0, 9), "SGI 9 still pending on CPU 0 from CPU 1");
        assertEquals(0b01, r.sgiSources(1, 9));
        // The restored GIC goes on as the original does.
        for (GicV2 x : new GicV2[] {g, r}) {
            x.cpuWrite(0, GICC_EOIR, 9);
            assertEquals(9 | 1 << 10, x.cpuRead(0, GICC_IAR));
            x.cpuWrite(1, GICC_EOIR, 27);
            assertEquals(27, x.cpuRead(1, GICC_IAR), "CPU 1: its line 27 is still high, 0x10 beats SGI 9 and SPI 37 (0xa0)");
            x.privateLine(1, 27).set(false);
            x.cpuWrite(1, GICC_EOIR, 27);
            assertEquals(0xe0, x.cpuRead(1, GICC_PMR));
            assertEquals(9, x.cpuRead(1, GICC_IAR), "then SGI 9 from CPU 0");
        }
    }

    static byte[] save(GicV2 g) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        g.saveState(new DataOutputStream(b));
        return b.toByteArray();
    }
}
