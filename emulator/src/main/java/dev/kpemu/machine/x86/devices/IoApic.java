package dev.kpemu.machine.x86.devices;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

import dev.kpemu.machine.Device;
import dev.kpemu.machine.IrqLine;
import dev.kpemu.machine.Stateful;

/**
 * The I/O APIC (82093AA) as QEMU's {@code pc} machine has it: one chip at {@link #DEFAULT_BASE},
 * version 0x20, 24 input pins, each with a 64-bit redirection entry; registers reached through
 * the index IOREGSEL (offset 0x00) and the data window IOWIN (0x10, 32-bit accesses only), plus the
 * directed-EOI register of version 0x20 (0x40). A pin is an {@link IrqLine} ({@link #line});
 * GSI n is pin n (the board wires ISA IRQ 0, the PIT, to pin 2, as the MADT's override says).
 * <p>
 * Modelled: ID, version and arbitration registers; edge pins (a rising level, ignored while the
 * entry is masked, as the datasheet says, is sent once), level pins (sent while asserted and
 * unmasked with remote IRR clear; sending sets remote IRR, which the EOI broadcast of a local APIC
 * for the entry's vector ({@link #endOfInterrupt}) or a write to the EOI register clears, and a
 * pin still asserted then is sent again); unmasking or rewriting an entry sends a pending request;
 * an entry rewritten as edge loses its remote IRR (Linux's {@code __eoi_ioapic_pin} relies on it).
 * Remote IRR and delivery status are read-only; delivery status always reads 0 (delivery is
 * immediate). Messages go to an {@link ApicDelivery} with the entry's destination, destination
 * mode, delivery mode, vector and trigger mode.
 * <p>
 * Not modelled: polarity (bit 13 is stored; a line's {@code true} is the asserted state, as in
 * QEMU), ExtINT entries (QEMU reads the 8259's vector there; Linux uses it only in its
 * "through 8259A" timer fallback — such an entry is sent as ExtINT with its vector field, and
 * {@link ApicBus} drops it), interrupt remapping, QEMU's delayed re-assertion after 10,000
 * successive EOIs of a stuck level pin.
 */
public final class IoApic implements Device.Mmio, Stateful {
    public static final long DEFAULT_BASE = 0xfec0_0000L;
    public static final int PINS = 24, VERSION = 0x20;
    // MMIO offsets
    public static final int IOREGSEL = 0x00, IOWIN = 0x10, EOI = 0x40;
    // register indices
    public static final int REG_ID = 0x00, REG_VER = 0x01, REG_ARB = 0x02, REG_REDTBL = 0x10;
    static final int ID_SHIFT = 24, ID_MASK = 0x0f, VER_ENTRIES_SHIFT = 16;
    // redirection entry bits
    public static final long VECTOR = 0xff, DELIVERY_MODE_SHIFT = 8, DEST_LOGICAL = 1L << 11, DELIVERY_STATUS = 1L << 12,
            POLARITY_LOW = 1L << 13, REMOTE_IRR = 1L << 14, LEVEL = 1L << 15, MASKED = 1L << 16;
    public static final int DEST_SHIFT = 56;
    static final long READ_ONLY = REMOTE_IRR | DELIVERY_STATUS;

    private final ApicDelivery sink;
    private int id, ioregsel;
    private int irr;            // pins requesting (edge: latched until sent; level: the pin's level)
    private int levels;         // the pins' current levels (to see an edge's rising side)
    private final long[] redtbl = new long[PINS];

    public IoApic(ApicDelivery sink) {
        this.sink = sink;
        reset();
    }

    @Override public String name() { return "ioapic"; }

    @Override public long mmioSize() { return 0x1000; }

    @Override
    public void reset() {
        id = 0;
        ioregsel = 0;
        irr = 0;
        levels = 0;
        java.util.Arrays.fill(redtbl, MASKED);
    }

    /** Input pin {@code pin} (GSI {@code pin}) as a device's interrupt line. */
    public IrqLine line(int pin) {
        if (pin < 0 || pin >= PINS) throw new IllegalArgumentException("I/O APIC pin " + pin);
        return level -> setPin(pin, level);
    }

    /** Drives input pin {@code pin}. */
    public void setPin(int pin, boolean level) {
        int bit = 1 << pin;
        boolean rising = level && (levels & bit) == 0;
        if (level) levels |= bit; else levels &= ~bit;
        long e = redtbl[pin];
        if ((e & LEVEL) != 0) {
            if (level) {
                irr |= bit;
                service();
            } else {
                irr &= ~bit;
            }
        } else if (rising && (e & MASKED) == 0) {
            irr |= bit;
            service();
        }
    }

    /** The redirection entry of {@code pin} (for tests and the board). */
    public long entry(int pin) { return redtbl[pin]; }

    /** The ID register's APIC ID. */
    public int id() { return id; }

    /** Sends every pending, unmasked request whose entry may send. */
    private void service() {
        for (int pin = 0; pin < PINS; pin++) {
            int bit = 1 << pin;
            if ((irr & bit) == 0) continue;
            long e = redtbl[pin];
            if ((e & MASKED) != 0) continue;
            boolean level = (e & LEVEL) != 0;
            if (level) {
                if ((e & REMOTE_IRR) != 0) continue; // the local APIC has not answered the last one
                redtbl[pin] = e | REMOTE_IRR;
            } else {
                irr &= ~bit;
            }
            sink.deliver((int) (e >>> DEST_SHIFT) & 0xff, (e & DEST_LOGICAL) != 0,
                    (int) (e >>> DELIVERY_MODE_SHIFT) & 7, (int) (e & VECTOR), level);
        }
    }

    /**
     * A local APIC's EOI broadcast (or a write to the EOI register) for {@code vector}: every
     * level entry with that vector loses its remote IRR, and a pin still asserted is sent again.
     */
    public void endOfInterrupt(int vector) {
        boolean again = false;
        for (int pin = 0; pin < PINS; pin++) {
            long e = redtbl[pin];
            if ((e & VECTOR) != (vector & 0xff) || (e & LEVEL) == 0 || (e & REMOTE_IRR) == 0) continue;
            redtbl[pin] = e & ~REMOTE_IRR;
            again |= (irr & (1 << pin)) != 0;
        }
        if (again) service();
    }

    @Override
    public long read(long offset, int size) {
        int off = (int) (offset & 0xff);
        if (off == IOREGSEL) return ioregsel;
        if (off != IOWIN || size != 4) return 0;
        return switch (ioregsel) {
            case REG_ID, REG_ARB -> (long) id << ID_SHIFT;
            case REG_VER -> VERSION | (PINS - 1) << VER_ENTRIES_SHIFT;
            default -> {
                int index = (ioregsel - REG_REDTBL) >> 1;
                if (ioregsel < REG_REDTBL || index >= PINS) yield 0L;
                yield (ioregsel & 1) != 0 ? redtbl[index] >>> 32 : redtbl[index] & 0xffff_ffffL;
            }
        };
    }

    @Override
    public void write(long offset, int size, long value) {
        int off = (int) (offset & 0xff);
        if (off == IOREGSEL) {
            ioregsel = (int) value & 0xff;
            return;
        }
        if (size != 4) return;
        if (off == EOI) {
            endOfInterrupt((int) value & 0xff);
            return;
        }
        if (off != IOWIN) return;
        switch (ioregsel) {
            case REG_ID -> id = (int) (value >>> ID_SHIFT) & ID_MASK;
            case REG_VER, REG_ARB -> { }
            default -> {
                int index = (ioregsel - REG_REDTBL) >> 1;
                if (ioregsel < REG_REDTBL || index >= PINS) return;
                long old = redtbl[index], v = value & 0xffff_ffffL;
                long e = (ioregsel & 1) != 0 ? (old & 0xffff_ffffL) | v << 32 : (old & ~0xffff_ffffL) | v;
                e = (e & ~READ_ONLY) | (old & READ_ONLY);
                if ((e & LEVEL) == 0) e &= ~REMOTE_IRR; // an edge entry has no remote IRR
                redtbl[index] = e;
                if ((e & LEVEL) != 0) {
                    // a level entry requests while its pin is asserted, whatever it was before
                    if ((levels & (1 << index)) != 0) irr |= 1 << index; else irr &= ~(1 << index);
                }
                service();
            }
        }
    }

    // ------------------------------------------------------------------ snapshot state

    @Override
    public void saveState(DataOutput out) throws IOException {
        out.writeInt(id);
        out.writeInt(ioregsel);
        out.writeInt(irr);
        out.writeInt(levels);
        for (long e : redtbl) out.writeLong(e);
    }

    @Override
    public void restoreState(DataInput in) throws IOException {
        int i = in.readInt(), sel = in.readInt(), r = in.readInt(), l = in.readInt();
        if ((i & ~ID_MASK) != 0 || (sel & ~0xff) != 0 || (r >>> PINS) != 0 || (l >>> PINS) != 0) throw new IOException("I/O APIC state out of range");
        id = i;
        ioregsel = sel;
        irr = r;
        levels = l;
        for (int p = 0; p < PINS; p++) redtbl[p] = in.readLong();
    }
}
