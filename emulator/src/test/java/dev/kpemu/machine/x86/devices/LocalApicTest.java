package dev.kpemu.machine.x86.devices;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.InterruptController;
import dev.kpemu.machine.VirtualClock;

/**
 * The xAPIC local APIC at register level. Expected values from the Intel SDM, vol. 3, chapter
 * "Advanced Programmable Interrupt Controller" (register offsets, PPR, acceptance of a vector whose
 * class is above PPR's, EOI of the highest in-service vector, ICR fields and shorthands, the
 * timer's divide table and counting) and QEMU's {@code pc} reset state (version 0x50014, SVR 0xff,
 * LVTs masked, the BSP's LINT0 in ExtINT mode, IA32_APIC_BASE 0xfee00000 | EN (bit 11) | BSP
 * (bit 8)). IRR/ISR/TMR bit v is in the word at offset base + 0x10 × (v / 32), bit v % 32.
 */
class LocalApicTest {
    private final VirtualClock clock = new VirtualClock(1_000_000_000L);
    private final ApicBus bus = new ApicBus();
    private final List<String> cpu0Log = new ArrayList<>(), cpu1Log = new ArrayList<>();
    private final LocalApic apic0 = new LocalApic(0, true, clock, bus, recorder(cpu0Log));
    private final LocalApic apic1 = new LocalApic(1, false, clock, bus, recorder(cpu1Log));

    private static LocalApic.CpuControl recorder(List<String> log) {
        return new LocalApic.CpuControl() {
            @Override public void init() { log.add("init"); }
            @Override public void startup(int vector) { log.add("startup:" + Integer.toHexString(vector)); }
        };
    }

    private static void enable(LocalApic a) { a.write(LocalApic.SVR, 4, LocalApic.SVR_ENABLE | 0xff); }

    private static boolean bitSet(LocalApic a, int base, int vector) {
        return (a.register(base + 0x10 * (vector / 32)) & 1 << (vector % 32)) != 0;
    }

    private void fixed(LocalApic target, int vector) { bus.deliver(target.apicId(), false, ApicDelivery.FIXED, vector, false); }

    private static void ipi(LocalApic from, int dest, int icrLow) {
        from.write(LocalApic.ICR_HIGH, 4, (long) dest << 24);
        from.write(LocalApic.ICR_LOW, 4, icrLow & 0xffff_ffffL);
    }

    @Test
    void resetStateAndRegisterReadBack() {
        assertEquals(0, apic0.register(LocalApic.ID));
        assertEquals(0x0100_0000, apic1.register(LocalApic.ID));
        assertEquals(0x0005_0014, apic0.register(LocalApic.VER), "QEMU's version 0x14, max LVT entry 5");
        assertEquals(0xff, apic0.register(LocalApic.SVR), "software disabled, spurious vector 0xff");
        assertEquals(0xffff_ffff, apic0.register(LocalApic.DFR), "flat model");
        assertEquals(0, apic0.register(LocalApic.TPR));
        assertEquals(0, apic0.register(LocalApic.PPR));
        assertEquals(0x700, apic0.register(LocalApic.LVT_LINT0), "BSP: LINT0 ExtINT, unmasked (virtual wire)");
        assertEquals(0x1_0000, apic1.register(LocalApic.LVT_LINT0));
        for (int off : new int[] {LocalApic.LVT_TIMER, LocalApic.LVT_THERMAL, LocalApic.LVT_PERF, LocalApic.LVT_LINT1, LocalApic.LVT_ERROR}) {
            assertEquals(0x1_0000, apic0.register(off), "LVT 0x" + Integer.toHexString(off) + " masked");
        }
        assertEquals(0xfee0_0900L, apic0.apicBase(), "base | EN | BSP");
        assertEquals(0xfee0_0800L, apic1.apicBase(), "base | EN");
        assertFalse(apic0.waitingForSipi());
        assertTrue(apic1.waitingForSipi(), "an AP waits for its SIPI");

        apic0.write(LocalApic.ID, 4, 0x0500_0000);
        assertEquals(0x0500_0000, apic0.register(LocalApic.ID));
        apic0.write(LocalApic.VER, 4, 0);
        assertEquals(0x0005_0014, apic0.register(LocalApic.VER), "read-only");
        apic0.write(LocalApic.TPR, 4, 0x1ff);
        assertEquals(0xff, apic0.register(LocalApic.TPR));
        apic0.write(LocalApic.TPR, 4, 0);
        apic0.write(LocalApic.LDR, 4, 0x1234_5678);
        assertEquals(0x1200_0000, apic0.register(LocalApic.LDR), "logical ID in bits 31:24");
        apic0.write(LocalApic.DFR, 4, 0x0fff_ffff);
        assertEquals(0x0fff_ffff, apic0.register(LocalApic.DFR), "cluster model");
        apic0.write(LocalApic.SVR, 4, 0xffff_ffffL);
        assertEquals(0x1ff, apic0.register(LocalApic.SVR));
        apic0.write(LocalApic.ICR_HIGH, 4, 0xffff_ffffL);
        assertEquals(0xff00_0000, apic0.register(LocalApic.ICR_HIGH), "destination field only");
        apic0.write(LocalApic.LVT_TIMER, 4, 0xffff_ffffL);
        assertEquals(0x3_00ff, apic0.register(LocalApic.LVT_TIMER), "vector, mask, periodic; no TSC-deadline; delivery status read-only");
        apic0.write(LocalApic.LVT_LINT0, 4, 0xffff_ffffL);
        assertEquals(0x1_a7ff, apic0.register(LocalApic.LVT_LINT0), "vector, mode, polarity, trigger, mask; remote IRR and status read-only");
        apic0.write(LocalApic.LVT_ERROR, 4, 0xffff_ffffL);
        assertEquals(0x1_00ff, apic0.register(LocalApic.LVT_ERROR));
        apic0.write(LocalApic.TIMER_DIVIDE, 4, 0xffff_ffffL);
        assertEquals(0xb, apic0.register(LocalApic.TIMER_DIVIDE), "bits 0, 1, 3");
        apic0.write(LocalApic.TIMER_INITIAL, 4, 0x1234_5678);
        assertEquals(0x1234_5678, apic0.register(LocalApic.TIMER_INITIAL));
        apic0.write(LocalApic.IRR, 4, 0xffff_ffffL);
        assertEquals(0, apic0.register(LocalApic.IRR), "IRR is read-only");

        // ESR: errors show after a write to ESR, which also clears them
        assertEquals(0, apic0.register(0x3f0), "a reserved offset reads 0 ...");
        assertEquals(0, apic0.register(LocalApic.ESR), "... and its error is not visible before an ESR write");
        apic0.write(LocalApic.ESR, 4, 0);
        assertEquals(LocalApic.ESR_ILLEGAL_ADDRESS, apic0.register(LocalApic.ESR));
        apic0.write(LocalApic.ESR, 4, 0);
        assertEquals(0, apic0.register(LocalApic.ESR));
    }

    @Test
    void highestVectorAbovePprIsDeliveredAndEoiEndsTheHighestInService() {
        enable(apic0);
        fixed(apic0, 0x31);
        fixed(apic0, 0x52);
        fixed(apic0, 0x45);
        assertEquals(1 << 5 | 1 << 18, apic0.register(LocalApic.IRR + 0x20), "0x45 and 0x52 in IRR word 2");
        assertEquals(1 << 17, apic0.register(LocalApic.IRR + 0x10), "0x31 in word 1");
        assertTrue(apic0.interruptAsserted());
        assertEquals(0x52, apic0.acknowledge(), "the highest vector first");
        assertFalse(bitSet(apic0, LocalApic.IRR, 0x52));
        assertTrue(bitSet(apic0, LocalApic.ISR, 0x52));
        assertEquals(0x50, apic0.register(LocalApic.PPR), "PPR = ISRV class when above TPR");
        assertFalse(apic0.interruptAsserted(), "0x45: class 4 is not above PPR's 5");
        assertEquals(0xff, apic0.acknowledge(), "nothing deliverable: the spurious vector");
        assertTrue(bitSet(apic0, LocalApic.IRR, 0x45), "the spurious acknowledge leaves IRR alone");

        fixed(apic0, 0x61);
        assertTrue(apic0.interruptAsserted(), "class 6 preempts class 5");
        assertEquals(0x61, apic0.acknowledge());
        assertEquals(0x60, apic0.register(LocalApic.PPR));
        apic0.write(LocalApic.EOI, 4, 0);
        assertFalse(bitSet(apic0, LocalApic.ISR, 0x61), "EOI ends the highest in service");
        assertTrue(bitSet(apic0, LocalApic.ISR, 0x52));
        assertFalse(apic0.interruptAsserted());
        apic0.write(LocalApic.EOI, 4, 0);
        assertEquals(0, apic0.register(LocalApic.PPR));
        assertEquals(0x45, apic0.acknowledge());
        apic0.write(LocalApic.EOI, 4, 0);

        apic0.write(LocalApic.TPR, 4, 0x30);
        assertEquals(0x30, apic0.register(LocalApic.PPR));
        assertFalse(apic0.interruptAsserted(), "0x31's class 3 is not above TPR's 3");
        apic0.write(LocalApic.TPR, 4, 0x2f);
        assertTrue(apic0.interruptAsserted());
        assertEquals(0x31, apic0.acknowledge());
        assertEquals(0x30, apic0.register(LocalApic.PPR), "TPR class 2 below ISRV class 3: PPR = 0x30");
        apic0.write(LocalApic.EOI, 4, 0);
        assertEquals(0x2f, apic0.register(LocalApic.PPR), "PPR = TPR when nothing is in service");
    }

    @Test
    void softwareDisabledApicHoldsRequests() {
        fixed(apic0, 0x40);
        assertTrue(bitSet(apic0, LocalApic.IRR, 0x40));
        assertFalse(apic0.interruptAsserted(), "SVR bit 8 clear");
        enable(apic0);
        assertTrue(apic0.interruptAsserted());
        assertEquals(0x40, apic0.acknowledge());
    }

    /** An 8259 stand-in: asserted while {@code vector} is set, acknowledged once. */
    private static final class StubPic implements InterruptController {
        int vector = -1, acks;
        @Override public void setLine(int line, boolean level) {}
        @Override public boolean interruptAsserted() { return vector >= 0; }
        @Override public int acknowledge() { acks++; int v = vector; vector = -1; return v; }
    }

    @Test
    void lint0InExtIntModePassesThe8259() {
        StubPic pic = new StubPic();
        apic0.connectExtInt(pic);
        assertFalse(apic0.interruptAsserted());
        pic.vector = 0x30;
        assertTrue(apic0.interruptAsserted(), "reset state: BSP LINT0 ExtINT, even while software disabled (QEMU)");
        assertEquals(0x30, apic0.acknowledge(), "the 8259's INTA gives the vector");
        assertEquals(1, pic.acks);

        apic0.write(LocalApic.LVT_LINT0, 4, 0x1_0700);
        pic.vector = 0x31;
        assertFalse(apic0.interruptAsserted(), "LINT0 masked");
        apic0.write(LocalApic.LVT_LINT0, 4, 0x700);
        enable(apic0);
        fixed(apic0, 0x80);
        assertEquals(0x31, apic0.acknowledge(), "ExtINT is taken before the APIC's own requests (QEMU)");
        assertEquals(0x80, apic0.acknowledge());

        // the APIC disabled in IA32_APIC_BASE: the 8259 reaches the CPU whatever LINT0 says
        apic0.write(LocalApic.LVT_LINT0, 4, 0x1_0700);
        apic0.writeApicBase(LocalApic.DEFAULT_BASE);
        pic.vector = 0x32;
        assertTrue(apic0.interruptAsserted());
        assertEquals(0x32, apic0.acknowledge());
    }

    @Test
    void lint1NmiAndLint0Fixed() {
        apic0.write(LocalApic.LVT_LINT1, 4, 0x400);          // NMI
        apic0.setLine(1, true);
        assertTrue(apic0.nmiPending());
        assertTrue(apic0.takeNmi());
        assertFalse(apic0.takeNmi(), "taken once");
        apic0.setLine(1, false);
        apic0.write(LocalApic.LVT_LINT1, 4, 0x1_0400);
        apic0.setLine(1, true);
        assertFalse(apic0.nmiPending(), "masked");

        enable(apic0);
        apic0.write(LocalApic.LVT_LINT0, 4, 0x55);           // fixed, edge, vector 0x55
        apic0.setLine(0, true);
        assertTrue(bitSet(apic0, LocalApic.IRR, 0x55));
        assertFalse(bitSet(apic0, LocalApic.TMR, 0x55));
    }

    @Test
    void apicBaseMsr() {
        enable(apic0);
        apic0.writeApicBase(0xfee0_0900L);
        assertEquals(0xfee0_0900L, apic0.apicBase());
        apic0.writeApicBase(0xfee0_0000L);                   // EN clear
        assertFalse(apic0.hardwareEnabled());
        assertEquals(0xfee0_0100L, apic0.apicBase(), "BSP is read-only");
        assertEquals(0xff, apic0.register(LocalApic.SVR), "software enable cleared with it");
        apic0.writeApicBase(0xfee0_0800L);
        assertFalse(apic0.hardwareEnabled(), "QEMU: disabled until reset");
        fixed(apic0, 0x40);
        assertFalse(bitSet(apic0, LocalApic.IRR, 0x40), "a disabled APIC is off the bus");
        apic0.reset();
        assertEquals(0xfee0_0900L, apic0.apicBase());
    }

    /** The SDM's divide table: DCR bits 3, 1, 0 = 000 → 2, 001 → 4, 010 → 8, 011 → 16, 100 → 32, 101 → 64, 110 → 128, 111 → 1. */
    @Test
    void divideConfiguration() {
        int[][] table = {{0x0, 2}, {0x1, 4}, {0x2, 8}, {0x3, 16}, {0x8, 32}, {0x9, 64}, {0xa, 128}, {0xb, 1}};
        apic0.write(LocalApic.LVT_TIMER, 4, 0xee);
        for (int[] row : table) {
            apic0.write(LocalApic.TIMER_DIVIDE, 4, row[0]);
            assertEquals(row[1], apic0.timerDivisor(), "DCR 0x" + Integer.toHexString(row[0]));
            apic0.write(LocalApic.TIMER_INITIAL, 4, 10);
            assertEquals(10L * row[1], clock.instructionsUntilNextEvent(), "10 counts at 1 GHz / " + row[1]);
        }
    }

    @Test
    void oneShotTimerCountsDownAndInterruptsOnce() {
        enable(apic0);
        apic0.write(LocalApic.TIMER_DIVIDE, 4, 0x3);         // divide by 16
        apic0.write(LocalApic.LVT_TIMER, 4, 0xee);           // one-shot, vector 0xee
        apic0.write(LocalApic.TIMER_INITIAL, 4, 1000);       // 1000 counts × 16 ns = 16,000 ns
        assertEquals(1000, apic0.register(LocalApic.TIMER_CURRENT));
        assertEquals(16_000, clock.instructionsUntilNextEvent());
        clock.advance(8_000);
        assertEquals(500, apic0.register(LocalApic.TIMER_CURRENT));
        clock.advance(7_999);
        clock.fireDue();
        assertEquals(1, apic0.register(LocalApic.TIMER_CURRENT), "15,999 ns: 999 counts gone");
        assertFalse(apic0.interruptAsserted());
        clock.advance(1);
        clock.fireDue();
        assertEquals(0, apic0.register(LocalApic.TIMER_CURRENT));
        assertEquals(0xee, apic0.acknowledge());
        apic0.write(LocalApic.EOI, 4, 0);
        clock.advance(1_000_000);
        clock.fireDue();
        assertFalse(apic0.interruptAsserted(), "one-shot");
        assertFalse(clock.hasEvents());
        assertEquals(0, apic0.register(LocalApic.TIMER_CURRENT));
        assertEquals(1000, apic0.register(LocalApic.TIMER_INITIAL));
    }

    /** Runs the clock to {@code until}, acknowledging and ending every timer interrupt; returns when each came. */
    private static List<Long> runTimer(VirtualClock clock, LocalApic a, long until) {
        List<Long> at = new ArrayList<>();
        while (clock.hasEvents() && clock.nanos() + clock.instructionsUntilNextEvent() <= until) {
            clock.advance(clock.instructionsUntilNextEvent());
            clock.fireDue();
            while (a.interruptAsserted()) {
                a.acknowledge();
                at.add(clock.nanos());
                a.write(LocalApic.EOI, 4, 0);
            }
        }
        clock.advance(until - clock.nanos());
        return at;
    }

    @Test
    void periodicTimerReloadsAndMaskingSilencesIt() {
        enable(apic0);
        apic0.write(LocalApic.TIMER_DIVIDE, 4, 0xb);         // divide by 1
        apic0.write(LocalApic.LVT_TIMER, 4, LocalApic.LVT_TIMER_PERIODIC | 0xef);
        apic0.write(LocalApic.TIMER_INITIAL, 4, 100);
        assertEquals(List.of(100L, 200L, 300L), runTimer(clock, apic0, 350));
        assertEquals(50, apic0.register(LocalApic.TIMER_CURRENT), "50 counts into the fourth period");
        assertEquals(List.of(400L), runTimer(clock, apic0, 400));
        assertEquals(100, apic0.register(LocalApic.TIMER_CURRENT), "reloaded from the initial count at zero");

        apic0.write(LocalApic.LVT_TIMER, 4, LocalApic.LVT_MASKED | LocalApic.LVT_TIMER_PERIODIC | 0xef);
        assertEquals(List.of(), runTimer(clock, apic0, 1_000));
        assertEquals(100, apic0.register(LocalApic.TIMER_CURRENT), "masked, the count still runs (1000 is a period's end)");
        clock.advance(30);
        assertEquals(70, apic0.register(LocalApic.TIMER_CURRENT));
        apic0.write(LocalApic.LVT_TIMER, 4, LocalApic.LVT_TIMER_PERIODIC | 0xef);
        assertEquals(List.of(1_100L, 1_200L), runTimer(clock, apic0, 1_250), "unmasked: on the period's grid");

        apic0.write(LocalApic.TIMER_INITIAL, 4, 0);
        assertFalse(clock.hasEvents(), "initial count 0 stops the timer");
        assertEquals(0, apic0.register(LocalApic.TIMER_CURRENT));

        // a divide change mid-count: the remaining counts go at the new rate
        apic0.write(LocalApic.TIMER_DIVIDE, 4, 0xb);
        apic0.write(LocalApic.LVT_TIMER, 4, 0xef);
        apic0.write(LocalApic.TIMER_INITIAL, 4, 100);        // at 1,250: one-shot due at 1,350
        clock.advance(40);
        apic0.write(LocalApic.TIMER_DIVIDE, 4, 0x0);         // divide by 2 with 60 counts left: due 1,290 + 120
        assertEquals(60, apic0.register(LocalApic.TIMER_CURRENT));
        assertEquals(List.of(1_410L), runTimer(clock, apic0, 2_000));
    }

    @Test
    void ipisReachTheApicsTheyName() {
        enable(apic0);
        enable(apic1);
        ipi(apic0, 1, 0xf0);                                 // fixed, physical, to APIC 1
        assertTrue(bitSet(apic1, LocalApic.IRR, 0xf0));
        assertFalse(bitSet(apic0, LocalApic.IRR, 0xf0));
        assertEquals(0xf0, apic0.register(LocalApic.ICR_LOW), "delivery status (bit 12) idle");

        ipi(apic0, 0, 0x4_00f1);                             // shorthand self
        assertTrue(bitSet(apic0, LocalApic.IRR, 0xf1));
        assertFalse(bitSet(apic1, LocalApic.IRR, 0xf1));
        ipi(apic0, 0, 0x8_00f2);                             // all including self
        assertTrue(bitSet(apic0, LocalApic.IRR, 0xf2) && bitSet(apic1, LocalApic.IRR, 0xf2));
        ipi(apic1, 0, 0xc_00f3);                             // all excluding self (from APIC 1)
        assertTrue(bitSet(apic0, LocalApic.IRR, 0xf3));
        assertFalse(bitSet(apic1, LocalApic.IRR, 0xf3));
        ipi(apic0, 0xff, 0xe0);                              // physical broadcast
        assertTrue(bitSet(apic0, LocalApic.IRR, 0xe0) && bitSet(apic1, LocalApic.IRR, 0xe0));

        // logical, flat model: LDR bit per CPU
        apic0.write(LocalApic.LDR, 4, 0x0100_0000);
        apic1.write(LocalApic.LDR, 4, 0x0200_0000);
        ipi(apic0, 0x02, 0x8e1);                             // logical (bit 11), fixed
        assertFalse(bitSet(apic0, LocalApic.IRR, 0xe1));
        assertTrue(bitSet(apic1, LocalApic.IRR, 0xe1));
        ipi(apic0, 0x03, 0x8e2);
        assertTrue(bitSet(apic0, LocalApic.IRR, 0xe2) && bitSet(apic1, LocalApic.IRR, 0xe2));
        ipi(apic1, 0x03, 0x9e3);                             // logical, lowest priority: one CPU
        assertTrue(bitSet(apic0, LocalApic.IRR, 0xe3), "the lowest APIC ID of the set");
        assertFalse(bitSet(apic1, LocalApic.IRR, 0xe3));
        // cluster model: cluster in bits 7:4, members in 3:0
        apic0.write(LocalApic.DFR, 4, 0x0fff_ffff);
        apic1.write(LocalApic.DFR, 4, 0x0fff_ffff);
        apic0.write(LocalApic.LDR, 4, 0x1100_0000);
        apic1.write(LocalApic.LDR, 4, 0x2100_0000);
        ipi(apic0, 0x21, 0x8e4);
        assertFalse(bitSet(apic0, LocalApic.IRR, 0xe4), "cluster 1 is not cluster 2");
        assertTrue(bitSet(apic1, LocalApic.IRR, 0xe4));

        ipi(apic0, 1, 0x400);                                // NMI
        assertTrue(apic1.nmiPending());
        assertFalse(apic0.nmiPending());

        ipi(apic0, 1, 0x05);                                 // fixed with vector 5: illegal, not sent
        apic0.write(LocalApic.ESR, 4, 0);
        assertEquals(LocalApic.ESR_SEND_ILLEGAL_VECTOR, apic0.register(LocalApic.ESR));
        assertFalse(bitSet(apic1, LocalApic.IRR, 0x05));
    }

    /** Linux's wakeup_secondary_cpu_via_init: INIT assert, INIT de-assert, then two STARTUPs. */
    @Test
    void initAndStartupReachTheCpuControl() {
        enable(apic1);
        apic1.write(LocalApic.TPR, 4, 0x20);
        ipi(apic0, 1, 0xc500);                               // INIT, level trigger, assert
        assertEquals(List.of("init"), cpu1Log);
        assertEquals(0, apic1.register(LocalApic.TPR), "INIT resets the APIC");
        assertEquals(0xff, apic1.register(LocalApic.SVR));
        assertEquals(0x0100_0000, apic1.register(LocalApic.ID), "but keeps its ID");
        assertTrue(apic1.waitingForSipi());
        ipi(apic0, 1, 0x8500);                               // INIT de-assert: no INIT
        assertEquals(List.of("init"), cpu1Log);
        ipi(apic0, 1, 0x0608);                               // STARTUP, vector 8: start at 0x8000
        assertEquals(List.of("init", "startup:8"), cpu1Log);
        assertFalse(apic1.waitingForSipi());
        ipi(apic0, 1, 0x0608);
        assertEquals(List.of("init", "startup:8"), cpu1Log, "a running CPU ignores STARTUP");
        ipi(apic1, 0, 0x0609);
        assertEquals(List.of(), cpu0Log, "the BSP does not wait for a STARTUP");
        assertEquals(List.of(), cpu0Log);
    }

    @Test
    void snapshotRoundTrip() throws IOException {
        enable(apic0);
        apic0.write(LocalApic.TPR, 4, 0x10);
        apic0.write(LocalApic.LDR, 4, 0x0400_0000);
        apic0.write(LocalApic.TIMER_DIVIDE, 4, 0xb);
        apic0.write(LocalApic.LVT_TIMER, 4, LocalApic.LVT_TIMER_PERIODIC | 0xef);
        apic0.write(LocalApic.LVT_LINT1, 4, 0x400);
        apic0.write(LocalApic.TIMER_INITIAL, 4, 100);
        fixed(apic0, 0x90);
        assertEquals(0x90, apic0.acknowledge());             // 0x90 in service
        fixed(apic0, 0x41);                                  // 0x41 waits behind it
        bus.deliver(0, false, ApicDelivery.FIXED, 0x42, true);
        apic0.setLine(1, true);                              // an NMI pending
        clock.advance(250);
        clock.fireDue();                                     // expiries at 100 and 200: 0xef requested
        apic0.register(0x3f0);                               // an illegal-address error, not yet in ESR

        ByteArrayOutputStream b = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(b);
        clock.saveState(out);
        apic0.saveState(out);
        apic1.saveState(out);

        VirtualClock clock2 = new VirtualClock(1_000_000_000L);
        ApicBus bus2 = new ApicBus();
        LocalApic copy0 = new LocalApic(0, true, clock2, bus2, LocalApic.CpuControl.NONE);
        LocalApic copy1 = new LocalApic(1, false, clock2, bus2, LocalApic.CpuControl.NONE);
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(b.toByteArray()));
        clock2.restoreState(in);
        copy0.restoreState(in);
        copy1.restoreState(in);
        assertEquals(-1, in.read(), "everything saved is read back");

        int[] offsets = {LocalApic.ID, LocalApic.VER, LocalApic.TPR, LocalApic.PPR, LocalApic.LDR, LocalApic.DFR, LocalApic.SVR,
            LocalApic.ICR_LOW, LocalApic.ICR_HIGH, LocalApic.LVT_TIMER, LocalApic.LVT_THERMAL, LocalApic.LVT_PERF, LocalApic.LVT_LINT0,
            LocalApic.LVT_LINT1, LocalApic.LVT_ERROR, LocalApic.TIMER_INITIAL, LocalApic.TIMER_CURRENT, LocalApic.TIMER_DIVIDE};
        for (int off : offsets) assertEquals(apic0.register(off), copy0.register(off), "register 0x" + Integer.toHexString(off));
        for (int w = 0; w < 8; w++) {
            for (int base : new int[] {LocalApic.ISR, LocalApic.TMR, LocalApic.IRR}) {
                assertEquals(apic0.register(base + 0x10 * w), copy0.register(base + 0x10 * w));
            }
        }
        assertEquals(50, copy0.register(LocalApic.TIMER_CURRENT));
        assertTrue(bitSet(copy0, LocalApic.TMR, 0x42));
        assertEquals(apic0.apicBase(), copy0.apicBase());
        assertTrue(copy1.waitingForSipi());
        copy0.write(LocalApic.ESR, 4, 0);
        assertEquals(LocalApic.ESR_ILLEGAL_ADDRESS, copy0.register(LocalApic.ESR), "the pending error came along");
        assertTrue(copy0.takeNmi());

        // both continue alike: the requests behind the one in service, then the timer on the same grid
        assertEquals(List.of(0xef, 0x42, 0x41), drain(apic0));
        assertEquals(List.of(0xef, 0x42, 0x41), drain(copy0));
        assertEquals(List.of(300L, 400L, 500L, 600L), runTimer(clock, apic0, 600));
        assertEquals(List.of(300L, 400L, 500L, 600L), runTimer(clock2, copy0, 600));
    }

    /** Ends what is in service, then acknowledges and ends every request; returns the vectors in order. */
    private static List<Integer> drain(LocalApic a) {
        a.write(LocalApic.EOI, 4, 0);
        List<Integer> vectors = new ArrayList<>();
        while (a.interruptAsserted()) {
            vectors.add(a.acknowledge());
            a.write(LocalApic.EOI, 4, 0);
        }
        return vectors;
    }
}
