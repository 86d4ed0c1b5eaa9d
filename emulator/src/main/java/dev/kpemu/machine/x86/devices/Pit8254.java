package dev.kpemu.machine.x86.devices;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

import dev.kpemu.machine.Device;
import dev.kpemu.machine.IrqLine;
import dev.kpemu.machine.VirtualClock;

/**
 * The 8254 programmable interval timer (ports 0x40-0x43) clocked at 1.193182 MHz of virtual
 * time, plus the PC's system control port B (0x61: channel 2 gate and speaker bits, channel 2
 * output, refresh toggle). Channel 0's output drives ISA IRQ 0; counting follows
 * {@link VirtualClock}, and interrupts are clock events, so they are exact in guest time.
 * Modes 0 (one-shot), 2 (rate generator), 3 (square wave) and 4 (software strobe) are
 * modelled; BCD counting is not.
 */
public final class Pit8254 implements Device.PortIo, dev.kpemu.machine.Stateful {
    public static final int CH0 = 0x40, CH1 = 0x41, CH2 = 0x42, MODE = 0x43, PORT_B = 0x61;
    public static final long FREQUENCY_HZ = 1_193_182;
    // control word fields
    static final int SC_SHIFT = 6, RW_SHIFT = 4, MODE_SHIFT = 1;
    static final int RW_LATCH = 0, RW_LSB = 1, RW_MSB = 2, RW_WORD = 3, SC_READBACK = 3;
    // port B bits
    public static final int PORTB_GATE2 = 0x01, PORTB_SPEAKER = 0x02, PORTB_REFRESH = 0x10, PORTB_OUT2 = 0x20;

    private final class Channel {
        final int index;
        int mode, rw = RW_WORD, reload = 0x10000;
        long startNanos = -1;      // when the current count was loaded (-1: not counting)
        boolean writeMsbNext, readMsbNext, latched;
        int latchValue, pendingLsb;
        boolean gate = true;
        Object event;
        long period;               // interrupts fired since startNanos (for exact periodic scheduling)

        Channel(int index) { this.index = index; }

        long ticksSinceStart(long now) {
            if (startNanos < 0) return 0;
            long e = now - startNanos;
            return e / 1_000_000_000L * FREQUENCY_HZ + e % 1_000_000_000L * FREQUENCY_HZ / 1_000_000_000L;
        }

        int count(long now) {
            if (startNanos < 0) return reload & 0xffff;
            long t = ticksSinceStart(now);
            return switch (mode) {
                case 2 -> (int) (reload - (t % reload)) & 0xffff;
                case 3 -> {
                    long half = t % reload;
                    yield (int) ((reload - 2 * (half % ((reload + 1) / 2))) & 0xfffe) & 0xffff;
                }
                default -> (int) ((reload - t) & 0xffff);
            };
        }

        boolean out(long now) {
            if (startNanos < 0) return mode != 0;
            long t = ticksSinceStart(now);
            return switch (mode) {
                case 0 -> t >= reload;
                case 2 -> (t % reload) != reload - 1;
                case 3 -> (t % reload) < (reload + 1) / 2;
                case 4 -> t != reload;
                default -> true;
            };
        }

        void writeControl(int rwBits, int modeBits) {
            if (rwBits == RW_LATCH) {
                if (!latched) {
                    latchValue = count(clock.liveNanos());
                    latched = true;
                    readMsbNext = false;
                }
                return;
            }
            rw = rwBits;
            mode = modeBits > 5 ? modeBits - 4 : modeBits; // 6, 7 alias 2, 3
            writeMsbNext = readMsbNext = latched = false;
            stop();
        }

        void writeCount(int v) {
            switch (rw) {
                case RW_LSB -> load(v);
                case RW_MSB -> load(v << 8);
                default -> {
                    if (!writeMsbNext) {
                        pendingLsb = v;
                        writeMsbNext = true;
                        if (mode == 0) stop(); // writing the first byte stops a one-shot count
                    } else {
                        writeMsbNext = false;
                        load(pendingLsb | (v << 8));
                    }
                }
            }
        }

        int readCount() {
            int value = latched ? latchValue : count(clock.liveNanos());
            switch (rw) {
                case RW_LSB -> { latched = false; return value & 0xff; }
                case RW_MSB -> { latched = false; return (value >> 8) & 0xff; }
                default -> {
                    if (!readMsbNext) {
                        readMsbNext = true;
                        return value & 0xff;
                    }
                    readMsbNext = false;
                    latched = false;
                    return (value >> 8) & 0xff;
                }
            }
        }

        void load(int value) {
            reload = value == 0 ? 0x10000 : value;
            startNanos = clock.liveNanos();
            period = 0;
            if (index == 0) scheduleNext();
        }

        void stop() {
            startNanos = -1;
            if (event != null) {
                clock.cancel(event);
                event = null;
            }
        }

        /** Channel 0: schedules the next IRQ 0 edge. */
        void scheduleNext() {
            if (event != null) clock.cancel(event);
            event = null;
            if (startNanos < 0) return;
            long ticks;
            switch (mode) {
                case 0, 4 -> {
                    if (period > 0) return; // one-shot: fired already
                    ticks = reload;
                }
                case 2, 3 -> ticks = (period + 1) * (long) reload;
                default -> { return; }
            }
            long due = startNanos + ticks / FREQUENCY_HZ * 1_000_000_000L + ceilDiv(ticks % FREQUENCY_HZ * 1_000_000_000L, FREQUENCY_HZ);
            event = clock.schedule(due, this::fire);
        }

        /** Channel 0's IRQ 0 edge is due. */
        void fire(long now) {
            event = null;
            period++;
            irq.pulse();
            scheduleNext();
        }
    }

    private final VirtualClock clock;
    private final IrqLine irq;
    private final Channel[] channels = {new Channel(0), new Channel(1), new Channel(2)};
    private int portB;
    private boolean refresh;

    public Pit8254(VirtualClock clock, IrqLine irq0) {
        this.clock = clock;
        this.irq = irq0;
    }

    private static long ceilDiv(long a, long b) { return (a + b - 1) / b; }

    @Override public String name() { return "pit8254"; }

    @Override
    public void reset() {
        for (Channel c : channels) {
            c.stop();
            c.mode = 0;
            c.rw = RW_WORD;
            c.reload = 0x10000;
        }
        portB = 0;
    }

    /** The current count of channel {@code ch} (for tests and tracing). */
    public int count(int ch) { return channels[ch].count(clock.liveNanos()); }

    public boolean output(int ch) { return channels[ch].out(clock.liveNanos()); }

    @Override
    public int in(int port, int size) {
        return switch (port) {
            case CH0, CH1, CH2 -> channels[port - CH0].readCount();
            case PORT_B -> {
                refresh = !refresh; // toggles on every read, as software delay loops expect
                yield (portB & 0x0f) | (refresh ? PORTB_REFRESH : 0)
                        | ((portB & PORTB_GATE2) != 0 && channels[2].out(clock.liveNanos()) ? PORTB_OUT2 : 0);
            }
            default -> 0xff; // the mode register is write-only
        };
    }

    @Override
    public void out(int port, int size, int value) {
        int v = value & 0xff;
        switch (port) {
            case CH0, CH1, CH2 -> channels[port - CH0].writeCount(v);
            case MODE -> {
                int sc = v >> SC_SHIFT;
                if (sc == SC_READBACK) return; // read-back command: not used by Linux
                channels[sc].writeControl((v >> RW_SHIFT) & 3, (v >> MODE_SHIFT) & 7);
            }
            case PORT_B -> {
                boolean oldGate = (portB & PORTB_GATE2) != 0;
                portB = v & 0x0f;
                Channel c2 = channels[2];
                if (!oldGate && (portB & PORTB_GATE2) != 0 && c2.startNanos >= 0) {
                    c2.startNanos = clock.liveNanos(); // a rising gate restarts the count
                }
            }
            default -> { }
        }
    }

    // ------------------------------------------------------------------ snapshot state

    @Override
    public void saveState(DataOutput out) throws IOException {
        for (Channel c : channels) {
            out.writeInt(c.mode);
            out.writeInt(c.rw);
            out.writeInt(c.reload);
            out.writeLong(c.startNanos);
            out.writeBoolean(c.writeMsbNext);
            out.writeBoolean(c.readMsbNext);
            out.writeBoolean(c.latched);
            out.writeInt(c.latchValue);
            out.writeInt(c.pendingLsb);
            out.writeBoolean(c.gate);
            out.writeLong(c.period);
            clock.writeEvent(out, c.event);
        }
        out.writeInt(portB);
        out.writeBoolean(refresh);
    }

    @Override
    public void restoreState(DataInput in) throws IOException {
        for (Channel c : channels) {
            c.mode = in.readInt();
            c.rw = in.readInt();
            c.reload = in.readInt();
            if (c.mode < 0 || c.mode > 5 || c.rw < 0 || c.rw > 3 || c.reload <= 0 || c.reload > 0x10000) throw new IOException("PIT state out of range");
            c.startNanos = in.readLong();
            c.writeMsbNext = in.readBoolean();
            c.readMsbNext = in.readBoolean();
            c.latched = in.readBoolean();
            c.latchValue = in.readInt();
            c.pendingLsb = in.readInt();
            c.gate = in.readBoolean();
            c.period = in.readLong();
            c.event = clock.readEvent(in, c::fire);
        }
        portB = in.readInt();
        refresh = in.readBoolean();
    }
}
