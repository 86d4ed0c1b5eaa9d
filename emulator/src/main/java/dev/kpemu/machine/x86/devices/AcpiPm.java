package dev.kpemu.machine.x86.devices;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

import dev.kpemu.machine.Device;
import dev.kpemu.machine.VirtualClock;

/**
 * ACPI fixed hardware in I/O space, as described by the FADT that
 * {@link dev.kpemu.machine.x86.AcpiTables} generates: the PM1a event block (status, enable),
 * the PM1a control block (SCI_EN always set: the machine has no SMI and is always in ACPI mode;
 * SLP_TYP/SLP_EN) and the 32-bit PM timer at 3.579545 MHz of virtual time. Writing SLP_EN with
 * the S5 sleep type powers the machine off.
 */
public final class AcpiPm implements Device.PortIo, dev.kpemu.machine.Stateful {
    // offsets from the block base
    public static final int PM1_STS = 0, PM1_EN = 2, PM1_CNT = 4, PM_TMR = 8, PORT_COUNT = 12;
    public static final int PM1_CNT_SCI_EN = 1, PM1_CNT_SLP_TYP_SHIFT = 10, PM1_CNT_SLP_TYP_MASK = 7 << 10,
            PM1_CNT_SLP_EN = 1 << 13;
    public static final long PM_TIMER_HZ = 3_579_545;
    /** The SLP_TYP value the DSDT's \_S5 package announces. */
    public static final int SLP_TYP_S5 = 5;

    private final int base;
    private final VirtualClock clock;
    private final Runnable powerOff;
    private int status, enable, control = PM1_CNT_SCI_EN;

    public AcpiPm(int base, VirtualClock clock, Runnable powerOff) {
        this.base = base;
        this.clock = clock;
        this.powerOff = powerOff;
    }

    @Override public String name() { return "acpi-pm"; }

    @Override public void reset() { status = enable = 0; control = PM1_CNT_SCI_EN; }

    /** The PM timer value (32 bits wrap). */
    public int timer() {
        long ns = clock.liveNanos();
        return (int) (ns / 1_000_000_000L * PM_TIMER_HZ + ns % 1_000_000_000L * PM_TIMER_HZ / 1_000_000_000L);
    }

    @Override
    public int in(int port, int size) {
        int off = port - base;
        int dword = off & ~3;
        long v = switch (dword) {
            case PM1_STS -> status | ((long) enable << 16);
            case PM1_CNT -> control;
            case PM_TMR -> Integer.toUnsignedLong(timer());
            default -> 0xffff_ffffL;
        };
        v >>>= 8 * (off - dword);
        return (int) (size == 1 ? v & 0xff : size == 2 ? v & 0xffff : v);
    }

    @Override
    public void out(int port, int size, int value) {
        int off = port - base;
        switch (off) {
            case PM1_STS -> {
                status &= ~(value & 0xffff); // write 1 to clear
                if (size == 4) enable = (value >>> 16) & 0xffff;
            }
            case PM1_EN -> enable = value & 0xffff;
            case PM1_CNT -> {
                control = (value & ~PM1_CNT_SLP_EN & 0xffff) | PM1_CNT_SCI_EN;
                if ((value & PM1_CNT_SLP_EN) != 0
                        && ((value & PM1_CNT_SLP_TYP_MASK) >> PM1_CNT_SLP_TYP_SHIFT) == SLP_TYP_S5) {
                    powerOff.run();
                }
            }
            default -> { }
        }
    }

    // ------------------------------------------------------------------ snapshot state

    @Override
    public void saveState(DataOutput out) throws IOException {
        out.writeInt(status);
        out.writeInt(enable);
        out.writeInt(control);
    }

    @Override
    public void restoreState(DataInput in) throws IOException {
        status = in.readInt();
        enable = in.readInt();
        control = in.readInt();
    }
}
