package dev.kpemu.machine.x86;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import dev.kpemu.machine.GuestMemory;
import dev.kpemu.machine.x86.devices.AcpiPm;

/**
 * A minimal ACPI table set generated for this machine, written into the reserved BIOS area:
 * RSDP (ACPI 2.0) → XSDT → FADT (revision 6, not hardware-reduced) → FACS and a DSDT whose only
 * content is the \_S5 sleep package; the APIC board's XSDT also links the MADT ({@link #madt}),
 * the PIC-only board has none (Linux keeps the 8259). No HPET, no MCFG (no PCI). The FADT points at the PM1a event
 * and control blocks and the PM timer of {@link AcpiPm}, and at the 0xcf9 reset register.
 */
public final class AcpiTables {
    public static final String OEM_ID = "KPEMU ", OEM_TABLE_ID = "KPEMUPC ";
    public static final int HEADER = 36, FADT_LENGTH = 276, FACS_LENGTH = 64;
    // FADT field offsets (ACPI 6.x, table 5.9)
    static final int FADT_FIRMWARE_CTRL = 36, FADT_DSDT = 40, FADT_SCI_INT = 46, FADT_SMI_CMD = 48,
            FADT_PM1A_EVT_BLK = 56, FADT_PM1A_CNT_BLK = 64, FADT_PM_TMR_BLK = 76, FADT_PM1_EVT_LEN = 88,
            FADT_PM1_CNT_LEN = 89, FADT_PM_TMR_LEN = 91, FADT_IAPC_BOOT_ARCH = 109, FADT_FLAGS = 112,
            FADT_RESET_REG = 116, FADT_RESET_VALUE = 128, FADT_MINOR_VERSION = 131, FADT_X_FIRMWARE_CTRL = 132,
            FADT_X_DSDT = 140, FADT_X_PM1A_EVT_BLK = 148, FADT_X_PM1A_CNT_BLK = 172, FADT_X_PM_TMR_BLK = 208;
    // FADT flags
    static final int FADT_F_WBINVD = 1, FADT_F_PROC_C1 = 1 << 2, FADT_F_PWR_BUTTON = 1 << 4, FADT_F_SLP_BUTTON = 1 << 5,
            FADT_F_TMR_VAL_EXT = 1 << 8, FADT_F_RESET_REG_SUP = 1 << 10;
    static final int IAPC_VGA_NOT_PRESENT = 1 << 2, IAPC_MSI_NOT_SUPPORTED = 1 << 3;
    static final int GAS_SYSTEM_IO = 1, GAS_ACCESS_BYTE = 1, GAS_ACCESS_WORD = 2, GAS_ACCESS_DWORD = 3;

    // MADT (ACPI 6.x, 5.2.12): revision 3, as QEMU's pc machine builds it
    public static final int MADT_REVISION = 3, MADT_PCAT_COMPAT = 1;
    public static final int MADT_LOCAL_APIC = 0, MADT_IO_APIC = 1, MADT_INTERRUPT_OVERRIDE = 2, MADT_LOCAL_APIC_NMI = 4;
    public static final int MADT_LOCAL_APIC_LENGTH = 8, MADT_IO_APIC_LENGTH = 12, MADT_OVERRIDE_LENGTH = 10, MADT_NMI_LENGTH = 6;
    public static final int MADT_ENABLED = 1;
    /** MPS INTI flags: polarity active high (bits 1:0 = 01), trigger level (bits 3:2 = 11). */
    public static final int MPS_ACTIVE_HIGH = 0x1, MPS_LEVEL = 0xc;
    /** The I/O APIC's ID in the MADT (QEMU's ACPI_BUILD_IOAPIC_ID). */
    public static final int IO_APIC_ID = 0;
    /** ISA IRQs QEMU's pc machine shares with PCI (PCI_ISA_IRQ_MASK): level, active high, identity-mapped. */
    public static final int[] PCI_ISA_IRQS = {5, 9, 10, 11};

    private AcpiTables() {}

    /**
     * The MADT ("APIC") of a PC with {@code cpus} CPUs, as QEMU's {@code pc} machine describes
     * its own: the local APIC address ({@code localApicBase}) and PCAT_COMPAT (an 8259 pair is
     * present); one Processor Local APIC entry per CPU (processor UID = APIC ID = CPU index,
     * enabled); the I/O APIC (ID {@link #IO_APIC_ID}, {@code ioApicBase}, GSI base 0); interrupt
     * source overrides ISA IRQ 0 → GSI 2 (flags 0: conforming to the bus) and IRQ 5, 9, 10, 11 →
     * the same GSI, level and active high; and the local APIC NMI entry, LINT1 on all processors
     * (UID 0xff). Linked into the XSDT by the APIC board ({@code X86Pc.Interrupts.APIC}).
     */
    public static byte[] madt(int cpus, long localApicBase, long ioApicBase) {
        if (cpus < 1 || cpus > 0xfe) throw new IllegalArgumentException("MADT for " + cpus + " CPUs");
        int length = 8 + cpus * MADT_LOCAL_APIC_LENGTH + MADT_IO_APIC_LENGTH
                + (1 + PCI_ISA_IRQS.length) * MADT_OVERRIDE_LENGTH + MADT_NMI_LENGTH;
        ByteBuffer b = le(length);
        b.putInt((int) localApicBase);
        b.putInt(MADT_PCAT_COMPAT);
        for (int cpu = 0; cpu < cpus; cpu++) {
            b.put((byte) MADT_LOCAL_APIC).put((byte) MADT_LOCAL_APIC_LENGTH);
            b.put((byte) cpu).put((byte) cpu);          // ACPI processor UID, APIC ID
            b.putInt(MADT_ENABLED);
        }
        b.put((byte) MADT_IO_APIC).put((byte) MADT_IO_APIC_LENGTH);
        b.put((byte) IO_APIC_ID).put((byte) 0);
        b.putInt((int) ioApicBase);
        b.putInt(0);                                     // global system interrupt base
        override(b, 0, 2, 0);
        for (int irq : PCI_ISA_IRQS) override(b, irq, irq, MPS_ACTIVE_HIGH | MPS_LEVEL);
        b.put((byte) MADT_LOCAL_APIC_NMI).put((byte) MADT_NMI_LENGTH);
        b.put((byte) 0xff);                              // all processors
        b.putShort((short) 0);                           // flags: conforming
        b.put((byte) 1);                                 // LINT1
        return table("APIC", MADT_REVISION, b.array());
    }

    private static void override(ByteBuffer b, int source, int gsi, int flags) {
        b.put((byte) MADT_INTERRUPT_OVERRIDE).put((byte) MADT_OVERRIDE_LENGTH);
        b.put((byte) 0).put((byte) source);              // bus 0 (ISA), source IRQ
        b.putInt(gsi);
        b.putShort((short) flags);
    }

    /** Writes the tables at {@code base} (16-byte aligned, in the BIOS area); returns the RSDP address. */
    public static long write(GuestMemory mem, long base, int pmBase, int sciIrq, int resetPort) {
        return write(mem, base, pmBase, sciIrq, resetPort, null);
    }

    /**
     * As above, with {@code madt} (a whole table, {@link #madt}; null: none) written after the DSDT
     * and linked into the XSDT after the FADT, as the APIC board's tables are.
     */
    public static long write(GuestMemory mem, long base, int pmBase, int sciIrq, int resetPort, byte[] madt) {
        long rsdp = base, xsdt = base + 0x40, fadt = base + 0x100, facs = base + 0x240, dsdt = base + 0x300, madtAt = base + 0x400;
        if (madt != null) mem.write(madtAt, madt);
        byte[] dsdtAml = dsdtAml();
        mem.write(dsdt, table("DSDT", 2, dsdtAml));

        ByteBuffer f = le(FACS_LENGTH);
        f.put(0, "FACS".getBytes(StandardCharsets.US_ASCII));
        f.putInt(4, FACS_LENGTH);
        f.put(32, (byte) 2); // version
        mem.write(facs, f.array());

        ByteBuffer b = le(FADT_LENGTH - HEADER);
        int o = -HEADER; // field offsets are from the table start
        b.putInt(FADT_FIRMWARE_CTRL + o, (int) facs);
        b.putInt(FADT_DSDT + o, (int) dsdt);
        b.putShort(FADT_SCI_INT + o, (short) sciIrq);
        b.putInt(FADT_SMI_CMD + o, 0); // no SMI: always in ACPI mode
        b.putInt(FADT_PM1A_EVT_BLK + o, pmBase + AcpiPm.PM1_STS);
        b.putInt(FADT_PM1A_CNT_BLK + o, pmBase + AcpiPm.PM1_CNT);
        b.putInt(FADT_PM_TMR_BLK + o, pmBase + AcpiPm.PM_TMR);
        b.put(FADT_PM1_EVT_LEN + o, (byte) 4);
        b.put(FADT_PM1_CNT_LEN + o, (byte) 2);
        b.put(FADT_PM_TMR_LEN + o, (byte) 4);
        b.putShort(FADT_IAPC_BOOT_ARCH + o, (short) (IAPC_VGA_NOT_PRESENT | IAPC_MSI_NOT_SUPPORTED));
        b.putInt(FADT_FLAGS + o, FADT_F_WBINVD | FADT_F_PROC_C1 | FADT_F_PWR_BUTTON | FADT_F_SLP_BUTTON
                | FADT_F_TMR_VAL_EXT | FADT_F_RESET_REG_SUP);
        gas(b, FADT_RESET_REG + o, 8, GAS_ACCESS_BYTE, resetPort);
        b.put(FADT_RESET_VALUE + o, (byte) 0x06);
        b.put(FADT_MINOR_VERSION + o, (byte) 4);
        b.putLong(FADT_X_FIRMWARE_CTRL + o, facs);
        b.putLong(FADT_X_DSDT + o, dsdt);
        gas(b, FADT_X_PM1A_EVT_BLK + o, 32, GAS_ACCESS_WORD, pmBase + AcpiPm.PM1_STS);
        gas(b, FADT_X_PM1A_CNT_BLK + o, 16, GAS_ACCESS_WORD, pmBase + AcpiPm.PM1_CNT);
        gas(b, FADT_X_PM_TMR_BLK + o, 32, GAS_ACCESS_DWORD, pmBase + AcpiPm.PM_TMR);
        mem.write(fadt, table("FACP", 6, b.array()));

        ByteBuffer x = le(madt == null ? 8 : 16);
        x.putLong(0, fadt);
        if (madt != null) x.putLong(8, madtAt);
        mem.write(xsdt, table("XSDT", 1, x.array()));

        ByteBuffer r = le(36);
        r.put(0, "RSD PTR ".getBytes(StandardCharsets.US_ASCII));
        r.put(9, OEM_ID.getBytes(StandardCharsets.US_ASCII));
        r.put(15, (byte) 2);      // revision: ACPI 2.0+
        r.putInt(16, 0);          // no RSDT
        r.putInt(20, 36);
        r.putLong(24, xsdt);
        r.put(8, checksum(r.array(), 0, 20));
        r.put(32, checksum(r.array(), 0, 36));
        mem.write(rsdp, r.array());
        return rsdp;
    }

    /** DSDT body: {@code Name (_S5, Package (4) {5, 5, 0, 0})}. */
    static byte[] dsdtAml() {
        int s5 = AcpiPm.SLP_TYP_S5;
        return new byte[] {
            0x08, '_', 'S', '5', '_',                 // NameOp "_S5_"
            0x12, 0x08, 0x04,                          // PackageOp, PkgLength 8, NumElements 4
            0x0a, (byte) s5, 0x0a, (byte) s5,          // BytePrefix SLP_TYPa, BytePrefix SLP_TYPb
            0x00, 0x00                                 // Zero, Zero (reserved)
        };
    }

    private static void gas(ByteBuffer b, int at, int bitWidth, int access, long address) {
        b.put(at, (byte) GAS_SYSTEM_IO);
        b.put(at + 1, (byte) bitWidth);
        b.put(at + 2, (byte) 0);
        b.put(at + 3, (byte) access);
        b.putLong(at + 4, address);
    }

    /** A table: standard 36-byte header + body, checksummed. */
    static byte[] table(String signature, int revision, byte[] body) {
        ByteBuffer t = le(HEADER + body.length);
        t.put(0, signature.getBytes(StandardCharsets.US_ASCII));
        t.putInt(4, HEADER + body.length);
        t.put(8, (byte) revision);
        t.put(10, OEM_ID.getBytes(StandardCharsets.US_ASCII));
        t.put(16, OEM_TABLE_ID.getBytes(StandardCharsets.US_ASCII));
        t.putInt(24, 1);                                              // OEM revision
        t.put(28, "KPEM".getBytes(StandardCharsets.US_ASCII));        // creator ID
        t.putInt(32, 1);                                              // creator revision
        t.put(HEADER, body);
        t.put(9, checksum(t.array(), 0, HEADER + body.length));
        return t.array();
    }

    static byte checksum(byte[] d, int from, int to) {
        int sum = 0;
        for (int i = from; i < to; i++) sum += d[i];
        return (byte) -sum;
    }

    private static ByteBuffer le(int n) { return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN); }
}
