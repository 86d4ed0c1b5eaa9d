package dev.kpemu.machine.x86.devices;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.VirtualClock;

/**
 * The 82093AA I/O APIC at register level. Expected values from the datasheet: IOREGSEL at 0x00,
 * IOWIN at 0x10; register 0 ID (bits 27:24), 1 version (bits 7:0 version, 23:16 maximum
 * redirection entry = pins - 1, so 0x00170020 for QEMU's version 0x20 with 24 pins), 2
 * arbitration; redirection entry n at registers 0x10 + 2n (low) and 0x11 + 2n (high): vector 7:0,
 * delivery mode 10:8, destination mode 11, delivery status 12 (RO), polarity 13, remote IRR 14
 * (RO), trigger 15 (1 = level), mask 16, destination 63:56; all entries masked after reset.
 */
class IoApicTest {
    record Message(int dest, boolean logical, int mode, int vector, boolean level) {}

    private final List<Message> sent = new ArrayList<>();
    private final IoApic io = new IoApic((d, l, m, v, lv) -> sent.add(new Message(d, l, m, v, lv)));

    private int reg(int index) {
        io.write(IoApic.IOREGSEL, 4, index);
        return (int) io.read(IoApic.IOWIN, 4);
    }

    private void setReg(int index, int value) {
        io.write(IoApic.IOREGSEL, 4, index);
        io.write(IoApic.IOWIN, 4, value & 0xffff_ffffL);
    }

    private void program(int pin, long entry) {
        setReg(0x11 + 2 * pin, (int) (entry >>> 32));
        setReg(0x10 + 2 * pin, (int) entry);
    }

    @Test
    void registersReadBackAsTheDatasheetSays() {
        assertEquals(0x0017_0020, reg(IoApic.REG_VER), "version 0x20, maximum redirection entry 23");
        assertEquals(0, reg(IoApic.REG_ID));
        setReg(IoApic.REG_ID, 0xff00_0000);
        assertEquals(0x0f00_0000, reg(IoApic.REG_ID), "the ID is 4 bits (27:24)");
        assertEquals(0x0f00_0000, reg(IoApic.REG_ARB), "arbitration ID reads as the ID");
        setReg(IoApic.REG_VER, 0);
        assertEquals(0x0017_0020, reg(IoApic.REG_VER), "version is read-only");
        for (int pin = 0; pin < 24; pin++) {
            assertEquals(0x0001_0000, reg(0x10 + 2 * pin), "pin " + pin + " masked after reset");
            assertEquals(0, reg(0x11 + 2 * pin));
        }
        // every writable bit of an entry; delivery status (12) and remote IRR (14) are read-only
        setReg(0x10 + 2 * 7, 0xffff_ffff);
        setReg(0x11 + 2 * 7, 0xab00_0000);
        assertEquals(0xffff_afff, reg(0x10 + 2 * 7), "bits 12 and 14 not written");
        assertEquals(0xab00_0000, reg(0x11 + 2 * 7));
        io.write(IoApic.IOREGSEL, 4, 0x3e);
        assertEquals(0x3e, io.read(IoApic.IOREGSEL, 4), "IOREGSEL reads back");
        assertEquals(0, reg(0x40), "beyond the last entry (0x3f) reads 0");
    }

    @Test
    void edgePinSendsOnceOnTheRisingSideAndNotWhileMasked() {
        program(1, 0x0300_0000_0000_0131L);   // dest 3, physical, lowest priority (1), vector 0x31, edge, unmasked
        sent.clear();
        io.setPin(1, true);
        assertEquals(List.of(new Message(3, false, 1, 0x31, false)), sent, "lowest priority (mode 1), vector 0x31 to APIC 3");
        io.setPin(1, true);
        assertEquals(1, sent.size(), "a held level is not a new edge");
        io.setPin(1, false);
        io.setPin(1, true);
        assertEquals(2, sent.size(), "the next rising edge is");
        assertEquals(0, io.entry(1) & IoApic.REMOTE_IRR, "edge entries never set remote IRR");

        program(2, 0x0000_0000_0001_0830L);   // masked, logical (bit 11), fixed, vector 0x30, dest 0
        sent.clear();
        io.setPin(2, true);
        io.setPin(2, false);
        assertEquals(List.of(), sent, "masked");
        program(2, 0x0000_0000_0000_0830L);
        assertEquals(List.of(), sent, "an edge that came while masked is ignored (82093AA), also on unmask");
        io.line(2).pulse();
        assertEquals(List.of(new Message(0, true, 0, 0x30, false)), sent);
    }

    @Test
    void levelPinWaitsForTheEoiBroadcastOfItsVector() {
        program(9, 0x0000_0000_0000_8041L);   // level, fixed, vector 0x41, dest 0
        sent.clear();
        io.setPin(9, true);
        assertEquals(List.of(new Message(0, false, 0, 0x41, true)), sent);
        assertEquals(IoApic.REMOTE_IRR, io.entry(9) & IoApic.REMOTE_IRR, "remote IRR set when the local APIC accepted it");
        io.setPin(9, true);
        assertEquals(1, sent.size(), "no new message while remote IRR is set");
        io.endOfInterrupt(0x42);
        assertEquals(1, sent.size(), "another vector's EOI does not touch it");
        assertEquals(IoApic.REMOTE_IRR, io.entry(9) & IoApic.REMOTE_IRR);
        io.endOfInterrupt(0x41);
        assertEquals(2, sent.size(), "still asserted after the EOI: sent again");
        assertEquals(IoApic.REMOTE_IRR, io.entry(9) & IoApic.REMOTE_IRR);
        io.setPin(9, false);
        io.endOfInterrupt(0x41);
        assertEquals(2, sent.size(), "deasserted: nothing more");
        assertEquals(0, io.entry(9) & IoApic.REMOTE_IRR, "the EOI cleared remote IRR");

        // the EOI register (version 0x20) does what the broadcast does
        io.setPin(9, true);
        assertEquals(3, sent.size());
        io.setPin(9, false);
        io.write(IoApic.EOI, 4, 0x41);
        assertEquals(0, io.entry(9) & IoApic.REMOTE_IRR);

        // a level pin asserted while masked is sent when unmasked
        program(10, 0x0000_0000_0001_8050L);
        io.setPin(10, true);
        assertEquals(3, sent.size());
        program(10, 0x0000_0000_0000_8050L);
        assertEquals(new Message(0, false, 0, 0x50, true), sent.get(3));

        // rewriting a level entry with remote IRR as edge drops the remote IRR (Linux's EOI by trigger flip)
        assertEquals(IoApic.REMOTE_IRR, io.entry(10) & IoApic.REMOTE_IRR);
        program(10, 0x0000_0000_0001_0050L);
        assertEquals(0, io.entry(10) & IoApic.REMOTE_IRR);
    }

    @Test
    void levelInterruptThroughALocalApicIsAnsweredByItsEoi() {
        VirtualClock clock = new VirtualClock(1_000_000_000L);
        ApicBus bus = new ApicBus();
        LocalApic cpu0 = new LocalApic(0, true, clock, bus, LocalApic.CpuControl.NONE);
        IoApic ioapic = new IoApic(bus);
        bus.onEoiBroadcast(ioapic::endOfInterrupt);
        cpu0.write(LocalApic.SVR, 4, LocalApic.SVR_ENABLE | 0xff);
        ioapic.write(IoApic.IOREGSEL, 4, 0x10 + 2 * 11);
        ioapic.write(IoApic.IOWIN, 4, 0x8061);      // pin 11: level, fixed, vector 0x61, physical dest 0
        ioapic.setPin(11, true);
        assertTrue(cpu0.interruptAsserted());
        assertEquals(0x61, cpu0.acknowledge());
        assertEquals(1 << 1, cpu0.register(LocalApic.TMR + 0x30), "TMR bit 0x61 (word 3, bit 1): level");
        assertEquals(IoApic.REMOTE_IRR, ioapic.entry(11) & IoApic.REMOTE_IRR);
        ioapic.setPin(11, false);
        cpu0.write(LocalApic.EOI, 4, 0);
        assertEquals(0, ioapic.entry(11) & IoApic.REMOTE_IRR, "the local APIC's EOI of a TMR vector reached the I/O APIC");
        assertEquals(0, cpu0.register(LocalApic.ISR + 0x30));
        // edge: the TMR bit is clear and the EOI is not broadcast
        ioapic.write(IoApic.IOREGSEL, 4, 0x10 + 2 * 4);
        ioapic.write(IoApic.IOWIN, 4, 0x0062);
        ioapic.setPin(4, true);
        assertEquals(0x62, cpu0.acknowledge());
        assertEquals(0, cpu0.register(LocalApic.TMR + 0x30) & 1 << 2);
    }

    @Test
    void snapshotRoundTrip() throws IOException {
        program(9, 0x0500_0000_0000_8041L);
        program(3, 0x0000_0000_0000_0033L);
        io.setPin(9, true);
        io.setPin(3, true);
        setReg(IoApic.REG_ID, 0x0200_0000);
        io.write(IoApic.IOREGSEL, 4, 0x13);
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        io.saveState(new DataOutputStream(b));

        List<Message> sent2 = new ArrayList<>();
        IoApic copy = new IoApic((d, l, m, v, lv) -> sent2.add(new Message(d, l, m, v, lv)));
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(b.toByteArray()));
        copy.restoreState(in);
        assertEquals(-1, in.read(), "everything saved is read back");
        assertEquals(List.of(), sent2, "restoring sends nothing");
        assertEquals(0x13, copy.read(IoApic.IOREGSEL, 4));
        for (int pin = 0; pin < 24; pin++) assertEquals(io.entry(pin), copy.entry(pin), "pin " + pin);
        copy.write(IoApic.IOREGSEL, 4, IoApic.REG_ID);
        assertEquals(0x0200_0000, copy.read(IoApic.IOWIN, 4));
        copy.endOfInterrupt(0x41);
        assertEquals(List.of(new Message(5, false, 0, 0x41, true)), sent2, "pin 9's level and remote IRR came along");
        copy.setPin(3, true);
        assertEquals(1, sent2.size(), "pin 3's level came along: held high is no new edge");
    }
}
