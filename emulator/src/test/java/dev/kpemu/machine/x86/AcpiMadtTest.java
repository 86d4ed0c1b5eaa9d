package dev.kpemu.machine.x86;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * The MADT parsed back by the ACPI specification's layout (6.5, 5.2.12): the 36-byte header
 * (signature "APIC", length at 4, revision at 8, checksum at 9: all bytes sum to 0), the local
 * APIC address (u32 at 36) and flags (u32 at 40, PCAT_COMPAT = bit 0), then entries of (type u8,
 * length u8): 0 Processor Local APIC (8: UID u8, APIC ID u8, flags u32, Enabled = bit 0), 1 I/O
 * APIC (12: ID u8, reserved u8, address u32, GSI base u32), 2 Interrupt Source Override (10: bus
 * u8 = 0 ISA, source u8, GSI u32, MPS INTI flags u16: polarity bits 1:0, 01 active high; trigger
 * bits 3:2, 11 level), 4 Local APIC NMI (6: UID u8, 0xff = all, flags u16, LINT# u8). The entries
 * QEMU's pc machine lists (hw/i386/acpi-common.c): one local APIC per CPU, the I/O APIC with ID 0
 * at 0xfec00000 and GSI base 0, IRQ 0 → GSI 2 with flags 0, IRQ 5, 9, 10, 11 level active high,
 * LINT1 as NMI on all processors.
 */
class AcpiMadtTest {
    record Entry(int type, List<Long> fields) {}

    private static List<Entry> entries(byte[] t) {
        ByteBuffer b = ByteBuffer.wrap(t).order(ByteOrder.LITTLE_ENDIAN);
        List<Entry> out = new ArrayList<>();
        int at = 44;
        while (at < t.length) {
            int type = t[at] & 0xff, len = t[at + 1] & 0xff;
            List<Long> f = switch (type) {
                case 0 -> List.of((long) (t[at + 2] & 0xff), (long) (t[at + 3] & 0xff), b.getInt(at + 4) & 0xffff_ffffL);
                case 1 -> List.of((long) (t[at + 2] & 0xff), (long) (t[at + 3] & 0xff), b.getInt(at + 4) & 0xffff_ffffL, b.getInt(at + 8) & 0xffff_ffffL);
                case 2 -> List.of((long) (t[at + 2] & 0xff), (long) (t[at + 3] & 0xff), b.getInt(at + 4) & 0xffff_ffffL, (long) (b.getShort(at + 8) & 0xffff));
                case 4 -> List.of((long) (t[at + 2] & 0xff), (long) (b.getShort(at + 3) & 0xffff), (long) (t[at + 5] & 0xff));
                default -> throw new AssertionError("unexpected entry type " + type);
            };
            int expectedLength = switch (type) { case 0 -> 8; case 1 -> 12; case 2 -> 10; default -> 6; };
            assertEquals(expectedLength, len, "entry type " + type + " length");
            out.add(new Entry(type, f));
            at += len;
        }
        assertEquals(t.length, at, "entries end with the table");
        return out;
    }

    private static Entry lapic(long uid, long id) { return new Entry(0, List.of(uid, id, 1L)); }

    private static Entry override(long irq, long gsi, long flags) { return new Entry(2, List.of(0L, irq, gsi, flags)); }

    @Test
    void madtForTwoCpusParsesBack() {
        byte[] t = AcpiTables.madt(2, 0xfee0_0000L, 0xfec0_0000L);
        ByteBuffer b = ByteBuffer.wrap(t).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals("APIC", new String(t, 0, 4, StandardCharsets.US_ASCII));
        int expectedLength = 36 + 8 + 2 * 8 + 12 + 5 * 10 + 6;
        assertEquals(expectedLength, t.length);
        assertEquals(expectedLength, b.getInt(4), "length field");
        assertEquals(3, t[8], "revision (QEMU's x86 MADT)");
        int sum = 0;
        for (byte x : t) sum += x;
        assertEquals(0, sum & 0xff, "checksum");
        assertEquals("KPEMU ", new String(t, 10, 6, StandardCharsets.US_ASCII));
        assertEquals(0xfee0_0000L, b.getInt(36) & 0xffff_ffffL, "local APIC address");
        assertEquals(1, b.getInt(40), "PCAT_COMPAT: an 8259 pair is present");
        assertEquals(List.of(
                lapic(0, 0), lapic(1, 1),
                new Entry(1, List.of(0L, 0L, 0xfec0_0000L, 0L)),
                override(0, 2, 0),
                override(5, 5, 0xd), override(9, 9, 0xd), override(10, 10, 0xd), override(11, 11, 0xd),
                new Entry(4, List.of(0xffL, 0L, 1L))), entries(t));
    }

    @Test
    void oneLocalApicEntryPerCpu() {
        for (int n : new int[] {1, 4, 8}) {
            byte[] t = AcpiTables.madt(n, 0xfee0_0000L, 0xfec0_0000L);
            assertEquals(36 + 8 + n * 8 + 12 + 50 + 6, ByteBuffer.wrap(t).order(ByteOrder.LITTLE_ENDIAN).getInt(4));
            int sum = 0;
            for (byte x : t) sum += x;
            assertEquals(0, sum & 0xff, "checksum with " + n + " CPUs");
            List<Entry> e = entries(t);
            for (int cpu = 0; cpu < n; cpu++) assertEquals(lapic(cpu, cpu), e.get(cpu));
            assertEquals(1, e.get(n).type(), "the I/O APIC follows the CPUs");
        }
        assertThrows(IllegalArgumentException.class, () -> AcpiTables.madt(0, 0xfee0_0000L, 0xfec0_0000L));
    }
}
