package dev.kpemu.machine.arm64.devices;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

import java.util.ArrayDeque;

import dev.kpemu.machine.Device;
import dev.kpemu.machine.IrqLine;

/**
 * An ARM PrimeCell PL011 UART (DDI 0183): the console of the arm64 machine. Transmission is
 * instant (every byte goes to the sink when written), so the transmit FIFO always reads empty
 * and never busy; received bytes come from {@link #input}. The interrupt line is
 * {@code (RIS & IMSC) != 0}: RX (and receive-timeout) while input is waiting, TX after each
 * transmitted byte until cleared through UARTICR (as QEMU models it; Linux writes the console
 * without TX interrupts and only unmasks TXIM when the FIFO is full, which never happens here).
 *
 * <p>The peripheral and PrimeCell ID registers (0xfe0-0xffc) identify a PL011 r1p5 to the
 * AMBA bus, which reads them before it binds the driver.
 */
public final class Pl011 implements Device.Mmio, dev.kpemu.machine.Stateful {
    // Register map (DDI 0183 table 3-1).
    public static final int UARTDR = 0x000, UARTRSR = 0x004, UARTFR = 0x018, UARTILPR = 0x020,
            UARTIBRD = 0x024, UARTFBRD = 0x028, UARTLCR_H = 0x02c, UARTCR = 0x030, UARTIFLS = 0x034,
            UARTIMSC = 0x038, UARTRIS = 0x03c, UARTMIS = 0x040, UARTICR = 0x044, UARTDMACR = 0x048,
            UARTPERIPHID0 = 0xfe0, UARTPCELLID0 = 0xff0;
    // Flag register bits.
    public static final int FR_CTS = 1, FR_BUSY = 1 << 3, FR_RXFE = 1 << 4, FR_TXFF = 1 << 5, FR_RXFF = 1 << 6, FR_TXFE = 1 << 7;
    // Interrupt bits (RIS/MIS/IMSC/ICR).
    public static final int INT_RX = 1 << 4, INT_TX = 1 << 5, INT_RT = 1 << 6, INT_ALL = 0x7ff;
    /** Reset values. */
    public static final int CR_RESET = 0x300, IFLS_RESET = 0x12;
    /** PeriphID0-3 (part 0x011, designer ARM 0x41, revision 1) and PCellID0-3 (0xb105f00d). */
    private static final int[] ID = {0x11, 0x10, 0x14, 0x00, 0x0d, 0xf0, 0x05, 0xb1};
    public static final int RX_FIFO_DEPTH = 32;

    /** Where transmitted bytes go. */
    @FunctionalInterface public interface Sink { void put(int b); }

    private final Sink sink;
    private final IrqLine irq;
    private final ArrayDeque<Integer> rx = new ArrayDeque<>();
    private int ibrd, fbrd, lcrH, cr, ifls, imsc, ris, dmacr, ilpr;
    private boolean lineLevel;
    private long transmitted;

    public Pl011(Sink sink, IrqLine irq) {
        this.sink = sink;
        this.irq = irq;
        reset();
    }

    @Override public String name() { return "pl011"; }

    @Override public long mmioSize() { return 0x1000; }

    @Override
    public void reset() {
        rx.clear();
        ibrd = fbrd = lcrH = imsc = ris = dmacr = ilpr = 0;
        cr = CR_RESET;
        ifls = IFLS_RESET;
        update();
    }

    /** Bytes written to UARTDR so far. */
    public long transmitted() { return transmitted; }

    /** How many more received bytes the FIFO holds now (the host keeps the rest until the guest reads). */
    public int receiveSpace() { return Math.max(0, RX_FIFO_DEPTH - rx.size()); }

    /** Queues received bytes (host to guest); bytes beyond the FIFO depth are dropped. */
    public void input(byte[] data) {
        for (byte b : data) if (rx.size() < RX_FIFO_DEPTH) rx.add(b & 0xff);
        if (!rx.isEmpty()) ris |= INT_RX | INT_RT;
        update();
    }

    @Override
    public long read(long offset, int size) {
        int off = (int) offset;
        switch (off) {
            case UARTDR -> {
                Integer b = rx.poll();
                if (rx.isEmpty()) ris &= ~(INT_RX | INT_RT);
                update();
                return b == null ? 0 : b;
            }
            case UARTRSR -> { return 0; }
            case UARTFR -> { return FR_TXFE | (rx.isEmpty() ? FR_RXFE : 0) | (rx.size() >= RX_FIFO_DEPTH ? FR_RXFF : 0); }
            case UARTILPR -> { return ilpr; }
            case UARTIBRD -> { return ibrd; }
            case UARTFBRD -> { return fbrd; }
            case UARTLCR_H -> { return lcrH; }
            case UARTCR -> { return cr; }
            case UARTIFLS -> { return ifls; }
            case UARTIMSC -> { return imsc; }
            case UARTRIS -> { return ris; }
            case UARTMIS -> { return ris & imsc; }
            case UARTDMACR -> { return dmacr; }
            default -> {
                if (off >= UARTPERIPHID0 && off < 0x1000) return ID[(off - UARTPERIPHID0) >> 2];
                return 0;
            }
        }
    }

    @Override
    public void write(long offset, int size, long value) {
        int v = (int) value;
        switch ((int) offset) {
            case UARTDR -> {
                sink.put(v & 0xff);
                transmitted++;
                ris |= INT_TX;
            }
            case UARTRSR -> { }
            case UARTILPR -> ilpr = v & 0xff;
            case UARTIBRD -> ibrd = v & 0xffff;
            case UARTFBRD -> fbrd = v & 0x3f;
            case UARTLCR_H -> lcrH = v & 0xff;
            case UARTCR -> cr = v & 0xffff;
            case UARTIFLS -> ifls = v & 0x3f;
            case UARTIMSC -> imsc = v & INT_ALL;
            case UARTICR -> {
                ris &= ~v;
                if (!rx.isEmpty()) ris |= INT_RX | INT_RT;     // still data: the condition holds
            }
            case UARTDMACR -> dmacr = v & 7;
            default -> { }
        }
        update();
    }

    private void update() {
        boolean l = (ris & imsc) != 0;
        if (l != lineLevel) {
            lineLevel = l;
            irq.set(l);
        }
    }

    /** The interrupt output's level. */
    public boolean interruptLevel() { return lineLevel; }

    // ------------------------------------------------------------------ snapshot state

    @Override
    public void saveState(DataOutput out) throws IOException {
        for (int v : new int[] {ibrd, fbrd, lcrH, cr, ifls, imsc, ris, dmacr, ilpr}) out.writeInt(v);
        out.writeBoolean(lineLevel);
        out.writeLong(transmitted);
        out.writeInt(rx.size());
        for (int b : rx) out.writeByte(b);
    }

    @Override
    public void restoreState(DataInput in) throws IOException {
        ibrd = in.readInt();
        fbrd = in.readInt();
        lcrH = in.readInt();
        cr = in.readInt();
        ifls = in.readInt();
        imsc = in.readInt();
        ris = in.readInt();
        dmacr = in.readInt();
        ilpr = in.readInt();
        lineLevel = in.readBoolean();
        transmitted = in.readLong();
        int n = in.readInt();
        if (n < 0 || n > 1 << 20) throw new IOException("UART receive queue out of range");
        rx.clear();
        for (int i = 0; i < n; i++) rx.add(in.readUnsignedByte());
    }
}
