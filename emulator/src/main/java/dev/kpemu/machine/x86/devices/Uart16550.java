package dev.kpemu.machine.x86.devices;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

import java.io.IOException;
import java.io.OutputStream;

import dev.kpemu.machine.Device;
import dev.kpemu.machine.IrqLine;

/**
 * A 16550A UART (the PC's COM1 at port 0x3f8, IRQ 4). Transmission is immediate: a byte written
 * to THR goes to the sink at once and THR is empty again, so a THR-empty interrupt is pending
 * whenever IER.ETBEI is set (until IIR reports it, or THR is written). The IRQ output is gated
 * by MCR.OUT2, as on the PC. Loopback (MCR.LOOP) reflects the modem-control outputs in MSR, which
 * Linux's 8250 probe checks. Receive is fed by {@link #receive}: LSR.DR while bytes wait, and the
 * received-data interrupt (IIR 0x04, above THRE in priority) while IER.ERBFI is set.
 */
public final class Uart16550 implements Device.PortIo, dev.kpemu.machine.Stateful {
    public static final int COM1_BASE = 0x3f8, COM1_IRQ = 4, COM2_BASE = 0x2f8, COM2_IRQ = 3, PORT_COUNT = 8;
    /** The receive FIFO's depth (16550A): {@link #receiveSpace}. */
    public static final int RX_FIFO_DEPTH = 16;

    // register offsets
    public static final int RBR_THR = 0, IER = 1, IIR_FCR = 2, LCR = 3, MCR = 4, LSR = 5, MSR = 6, SCR = 7;
    // IER bits
    public static final int IER_ERBFI = 0x01, IER_ETBEI = 0x02, IER_ELSI = 0x04, IER_EDSSI = 0x08;
    // IIR values
    public static final int IIR_NO_INT = 0x01, IIR_THRI = 0x02, IIR_RDI = 0x04, IIR_RLSI = 0x06, IIR_MSI = 0x00,
            IIR_FIFO_ENABLED = 0xc0;
    // FCR bits
    public static final int FCR_ENABLE = 0x01, FCR_CLEAR_RCVR = 0x02, FCR_CLEAR_XMIT = 0x04;
    // LCR / MCR / LSR / MSR bits
    public static final int LCR_DLAB = 0x80;
    public static final int MCR_DTR = 0x01, MCR_RTS = 0x02, MCR_OUT1 = 0x04, MCR_OUT2 = 0x08, MCR_LOOP = 0x10;
    public static final int LSR_DR = 0x01, LSR_THRE = 0x20, LSR_TEMT = 0x40;
    public static final int MSR_CTS = 0x10, MSR_DSR = 0x20, MSR_RI = 0x40, MSR_DCD = 0x80;

    private final OutputStream sink;
    private final IrqLine irq;
    private int ier, lcr, mcr, scr, fcr, dll = 0x0c, dlm;
    private boolean thriPending;
    private final java.util.ArrayDeque<Integer> rx = new java.util.ArrayDeque<>();
    private boolean irqLevel;
    private long transmitted;

    public Uart16550(OutputStream sink, IrqLine irq) {
        this.sink = sink;
        this.irq = irq;
    }

    @Override public String name() { return "uart16550"; }

    @Override
    public void reset() {
        ier = lcr = mcr = scr = fcr = dlm = 0;
        dll = 0x0c;
        thriPending = false;
        rx.clear();
        update();
    }

    /** Bytes written to THR so far (outside loopback). */
    public long transmitted() { return transmitted; }

    /** How many more received bytes the FIFO holds now (the host keeps the rest until the guest reads). */
    public int receiveSpace() { return Math.max(0, RX_FIFO_DEPTH - rx.size()); }

    /** Queues bytes the guest can read from RBR (host keyboard input); raises the receive interrupt when enabled. */
    public void receive(byte[] data) {
        for (byte b : data) rx.add(b & 0xff);
        update();
    }

    @Override
    public int in(int port, int size) {
        int reg = port & 7;
        int v = switch (reg) {
            case RBR_THR -> {
                if ((lcr & LCR_DLAB) != 0) yield dll;
                Integer b = rx.poll();
                yield b == null ? 0 : b;
            }
            case IER -> (lcr & LCR_DLAB) != 0 ? dlm : ier;
            case IIR_FCR -> readIir();
            case LCR -> lcr;
            case MCR -> mcr;
            case LSR -> (rx.isEmpty() ? 0 : LSR_DR) | LSR_THRE | LSR_TEMT;
            case MSR -> readMsr();
            default -> scr;
        };
        if (reg == RBR_THR || reg == IIR_FCR) update();
        return v;
    }

    private int readIir() {
        int fifo = (fcr & FCR_ENABLE) != 0 ? IIR_FIFO_ENABLED : 0;
        if ((ier & IER_ERBFI) != 0 && !rx.isEmpty()) return fifo | IIR_RDI;
        if ((ier & IER_ETBEI) != 0 && thriPending) {
            thriPending = false; // reading IIR when it reports THRI clears it
            return fifo | IIR_THRI;
        }
        return fifo | IIR_NO_INT;
    }

    private int readMsr() {
        if ((mcr & MCR_LOOP) != 0) {
            int v = 0;
            if ((mcr & MCR_RTS) != 0) v |= MSR_CTS;
            if ((mcr & MCR_DTR) != 0) v |= MSR_DSR;
            if ((mcr & MCR_OUT1) != 0) v |= MSR_RI;
            if ((mcr & MCR_OUT2) != 0) v |= MSR_DCD;
            return v;
        }
        return MSR_CTS | MSR_DSR | MSR_DCD; // a terminal is attached and ready
    }

    @Override
    public void out(int port, int size, int value) {
        int v = value & 0xff;
        switch (port & 7) {
            case RBR_THR -> {
                if ((lcr & LCR_DLAB) != 0) { dll = v; return; }
                if ((mcr & MCR_LOOP) != 0) {
                    rx.add(v);
                } else {
                    transmitted++;
                    try {
                        sink.write(v);
                        if (v == '\n') sink.flush();
                    } catch (IOException e) {
                        // a broken console sink must not stop the guest
                    }
                }
                thriPending = true; // THR is empty again at once
            }
            case IER -> {
                if ((lcr & LCR_DLAB) != 0) { dlm = v; return; }
                int old = ier;
                ier = v & 0x0f;
                // Enabling ETBEI while THR is empty raises THRI (the 8250 driver's THRE test relies
                // on it); disabling it drops a pending THRI.
                if (((old ^ ier) & IER_ETBEI) != 0) thriPending = (ier & IER_ETBEI) != 0;
            }
            case IIR_FCR -> {
                fcr = v & 0xc9;
                if ((v & FCR_CLEAR_RCVR) != 0) rx.clear();
            }
            case LCR -> lcr = v;
            case MCR -> mcr = v & 0x1f;
            case LSR, MSR -> { }
            default -> scr = v;
        }
        update();
    }

    /** The interrupt condition, gated by OUT2. */
    private void update() {
        boolean pending = ((ier & IER_ERBFI) != 0 && !rx.isEmpty()) || ((ier & IER_ETBEI) != 0 && thriPending);
        boolean level = pending && (mcr & MCR_OUT2) != 0;
        if (level != irqLevel) {
            irqLevel = level;
            irq.set(level);
        }
    }

    public boolean irqLevel() { return irqLevel; }

    // ------------------------------------------------------------------ snapshot state

    @Override
    public void saveState(DataOutput out) throws IOException {
        for (int v : new int[] {ier, lcr, mcr, scr, fcr, dll, dlm}) out.writeInt(v);
        out.writeBoolean(thriPending);
        out.writeBoolean(irqLevel);
        out.writeLong(transmitted);
        out.writeInt(rx.size());
        for (int b : rx) out.writeByte(b);
    }

    @Override
    public void restoreState(DataInput in) throws IOException {
        ier = in.readInt();
        lcr = in.readInt();
        mcr = in.readInt();
        scr = in.readInt();
        fcr = in.readInt();
        dll = in.readInt();
        dlm = in.readInt();
        thriPending = in.readBoolean();
        irqLevel = in.readBoolean();
        transmitted = in.readLong();
        int n = in.readInt();
        if (n < 0 || n > 1 << 20) throw new IOException("UART receive queue out of range");
        rx.clear();
        for (int i = 0; i < n; i++) rx.add(in.readUnsignedByte());
    }
}
