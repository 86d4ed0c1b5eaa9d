package dev.kpemu.machine.x86.devices;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

import dev.kpemu.machine.Device;
import dev.kpemu.machine.InterruptController;

/**
 * The PC's two cascaded 8259A interrupt controllers (master at 0x20, slave at 0xa0 on the
 * master's IRQ 2) with the edge/level control registers (ELCR, 0x4d0/0x4d1). Implements what
 * Linux's i8259 driver uses: ICW1-4 initialisation, IMR, specific and non-specific EOI, OCW3
 * IRR/ISR reads, auto-EOI; fixed priority (IRQ 0 highest). Rotation, poll and special mask
 * modes are not modelled.
 */
public final class Pic8259 implements Device.PortIo, InterruptController, dev.kpemu.machine.Stateful {
    public static final int MASTER_CMD = 0x20, MASTER_DATA = 0x21, SLAVE_CMD = 0xa0, SLAVE_DATA = 0xa1,
            ELCR_MASTER = 0x4d0, ELCR_SLAVE = 0x4d1;
    public static final int CASCADE_IRQ = 2;
    // command-port bits
    static final int ICW1 = 0x10, ICW1_IC4 = 0x01, ICW1_SNGL = 0x02, OCW3 = 0x08, OCW3_RR = 0x02, OCW3_RIS = 0x01;
    static final int OCW2_EOI = 0x20, OCW2_SL = 0x40;
    static final int ICW4_AEOI = 0x02;

    /** One 8259A. */
    static final class Chip {
        int irr, imr, isr, elcr, lastLevels, vectorBase;
        int initStep; // 0 = operational, 2..4 = expecting ICW2..ICW4
        boolean icw4Needed, single, readIsr, autoEoi;

        void reset() {
            irr = imr = isr = lastLevels = 0;
            initStep = 0;
            icw4Needed = single = readIsr = autoEoi = false;
        }

        void setIrq(int n, boolean level) {
            int bit = 1 << n;
            if ((elcr & bit) != 0) {
                if (level) irr |= bit; else irr &= ~bit;
            } else if (level && (lastLevels & bit) == 0) {
                irr |= bit;
            }
            if (level) lastLevels |= bit; else lastLevels &= ~bit;
        }

        /** Highest-priority requested, unmasked IRQ not blocked by an in-service one of higher or equal priority, or -1. */
        int pending() {
            int req = irr & ~imr;
            if (req == 0) return -1;
            int irqNo = Integer.numberOfTrailingZeros(req);
            if (isr != 0 && Integer.numberOfTrailingZeros(isr) <= irqNo) return -1;
            return irqNo;
        }

        /** INTA for {@code n}: moves it from IRR to ISR (edge) or just to ISR (level). */
        void acknowledge(int n) {
            int bit = 1 << n;
            if (!autoEoi) isr |= bit;
            if ((elcr & bit) == 0) irr &= ~bit;
        }

        void writeCommand(int v) {
            if ((v & ICW1) != 0) {
                int keepElcr = elcr;
                reset();
                elcr = keepElcr;
                icw4Needed = (v & ICW1_IC4) != 0;
                single = (v & ICW1_SNGL) != 0;
                initStep = 2;
            } else if ((v & OCW3) != 0) {
                if ((v & OCW3_RR) != 0) readIsr = (v & OCW3_RIS) != 0;
            } else if ((v & OCW2_EOI) != 0) {
                if ((v & OCW2_SL) != 0) {
                    isr &= ~(1 << (v & 7));
                } else if (isr != 0) {
                    isr &= isr - 1; // clear the highest-priority (lowest-numbered) in-service bit
                }
            }
        }

        void writeData(int v) {
            switch (initStep) {
                case 2 -> {
                    vectorBase = v & 0xf8;
                    initStep = single ? (icw4Needed ? 4 : 0) : 3;
                }
                case 3 -> initStep = icw4Needed ? 4 : 0;
                case 4 -> {
                    autoEoi = (v & ICW4_AEOI) != 0;
                    initStep = 0;
                }
                default -> imr = v;
            }
        }

        int readCommand() { return readIsr ? isr : irr; }
    }

    final Chip master = new Chip(), slave = new Chip();

    @Override public String name() { return "pic8259"; }

    @Override
    public void reset() {
        master.reset();
        slave.reset();
        master.elcr = slave.elcr = 0;
    }

    /** Sets ISA IRQ line {@code irq} (0-15). */
    @Override
    public void setLine(int irq, boolean level) {
        if (irq < 8) master.setIrq(irq, level);
        else {
            slave.setIrq(irq - 8, level);
            cascade();
        }
    }

    private void cascade() {
        master.setIrq(CASCADE_IRQ, slave.pending() >= 0);
    }

    /** True when the INTR output to the CPU is asserted. */
    @Override
    public boolean interruptAsserted() {
        cascade();
        return master.pending() >= 0;
    }

    /** The CPU's interrupt acknowledge: returns the vector (a spurious IRQ 7/15 vector if nothing is pending). */
    @Override
    public int acknowledge() {
        cascade();
        int m = master.pending();
        if (m < 0) return master.vectorBase + 7;
        master.acknowledge(m);
        if (m != CASCADE_IRQ) return master.vectorBase + m;
        int s = slave.pending();
        int vector;
        if (s < 0) {
            vector = slave.vectorBase + 7;
        } else {
            slave.acknowledge(s);
            vector = slave.vectorBase + s;
        }
        cascade();
        return vector;
    }

    @Override
    public int in(int port, int size) {
        return switch (port) {
            case MASTER_CMD -> master.readCommand();
            case MASTER_DATA -> master.imr;
            case SLAVE_CMD -> slave.readCommand();
            case SLAVE_DATA -> slave.imr;
            case ELCR_MASTER -> master.elcr;
            case ELCR_SLAVE -> slave.elcr;
            default -> 0xff;
        };
    }

    @Override
    public void out(int port, int size, int value) {
        int v = value & 0xff;
        switch (port) {
            case MASTER_CMD -> master.writeCommand(v);
            case MASTER_DATA -> master.writeData(v);
            case SLAVE_CMD -> slave.writeCommand(v);
            case SLAVE_DATA -> slave.writeData(v);
            case ELCR_MASTER -> master.elcr = v & 0xf8; // IRQ 0, 1, 2 are always edge
            case ELCR_SLAVE -> slave.elcr = v & 0xde;   // IRQ 8 and 13 are always edge
            default -> { }
        }
        cascade();
    }

    // ------------------------------------------------------------------ snapshot state

    @Override
    public void saveState(DataOutput out) throws IOException {
        for (Chip c : new Chip[] {master, slave}) {
            for (int v : new int[] {c.irr, c.imr, c.isr, c.elcr, c.lastLevels, c.vectorBase, c.initStep}) out.writeInt(v);
            out.writeBoolean(c.icw4Needed);
            out.writeBoolean(c.single);
            out.writeBoolean(c.readIsr);
            out.writeBoolean(c.autoEoi);
        }
    }

    @Override
    public void restoreState(DataInput in) throws IOException {
        for (Chip c : new Chip[] {master, slave}) {
            c.irr = in.readInt();
            c.imr = in.readInt();
            c.isr = in.readInt();
            c.elcr = in.readInt();
            c.lastLevels = in.readInt();
            c.vectorBase = in.readInt();
            c.initStep = in.readInt();
            c.icw4Needed = in.readBoolean();
            c.single = in.readBoolean();
            c.readIsr = in.readBoolean();
            c.autoEoi = in.readBoolean();
        }
    }
}
