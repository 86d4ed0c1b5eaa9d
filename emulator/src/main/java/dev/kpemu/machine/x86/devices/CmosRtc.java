package dev.kpemu.machine.x86.devices;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

import java.time.LocalDateTime;
import java.time.ZoneOffset;

import dev.kpemu.machine.Device;
import dev.kpemu.machine.VirtualClock;

/**
 * The MC146818 CMOS RTC at ports 0x70 (index, bit 7 = NMI disable) / 0x71 (data). The time is a
 * fixed epoch plus virtual time, so two runs read the same dates. BCD or binary and 12/24-hour
 * formats follow status register B; update-in-progress is never reported; no alarm or
 * periodic interrupts (Linux's rtc_cmos does not need them to boot).
 */
public final class CmosRtc implements Device.PortIo, dev.kpemu.machine.Stateful {
    public static final int INDEX = 0x70, DATA = 0x71;
    public static final int SECONDS = 0x00, MINUTES = 0x02, HOURS = 0x04, DAY_OF_WEEK = 0x06, DAY = 0x07,
            MONTH = 0x08, YEAR = 0x09, STATUS_A = 0x0a, STATUS_B = 0x0b, STATUS_C = 0x0c, STATUS_D = 0x0d,
            CENTURY = 0x32;
    public static final int B_24H = 0x02, B_BINARY = 0x04, B_SET = 0x80, D_VRT = 0x80, A_DIVIDER_32K = 0x26;
    /** The default epoch: 2025-01-01 00:00:00 UTC. */
    public static final long DEFAULT_EPOCH_SECONDS = 1_735_689_600L;

    private final VirtualClock clock;
    private final long epochSeconds;
    private final byte[] ram = new byte[128];
    private int index;

    public CmosRtc(VirtualClock clock, long epochSeconds) {
        this.clock = clock;
        this.epochSeconds = epochSeconds;
        reset();
    }

    @Override public String name() { return "cmos-rtc"; }

    @Override
    public void reset() {
        java.util.Arrays.fill(ram, (byte) 0);
        ram[STATUS_A] = A_DIVIDER_32K;
        ram[STATUS_B] = B_24H;
        ram[STATUS_D] = (byte) D_VRT;
        index = 0;
    }

    /** Current RTC time in seconds since the Unix epoch. */
    public long seconds() { return epochSeconds + clock.liveNanos() / 1_000_000_000L; }

    @Override
    public int in(int port, int size) {
        if (port != DATA) return 0xff;
        return switch (index) {
            case SECONDS, MINUTES, HOURS, DAY_OF_WEEK, DAY, MONTH, YEAR, CENTURY -> timeField(index);
            case STATUS_C -> 0; // no interrupt flags: reading clears them
            default -> ram[index] & 0xff;
        };
    }

    private int timeField(int reg) {
        LocalDateTime t = LocalDateTime.ofEpochSecond(seconds(), 0, ZoneOffset.UTC);
        int v = switch (reg) {
            case SECONDS -> t.getSecond();
            case MINUTES -> t.getMinute();
            case HOURS -> t.getHour();
            case DAY_OF_WEEK -> t.getDayOfWeek().getValue() % 7 + 1;
            case DAY -> t.getDayOfMonth();
            case MONTH -> t.getMonthValue();
            case YEAR -> t.getYear() % 100;
            default -> t.getYear() / 100;
        };
        boolean pm = false;
        if (reg == HOURS && (ram[STATUS_B] & B_24H) == 0) {
            pm = v >= 12;
            v = v % 12 == 0 ? 12 : v % 12;
        }
        if ((ram[STATUS_B] & B_BINARY) == 0) v = (v / 10) << 4 | (v % 10);
        return pm ? v | 0x80 : v;
    }

    @Override
    public void out(int port, int size, int value) {
        if (port == INDEX) {
            index = value & 0x7f;
        } else if (port == DATA) {
            switch (index) {
                case STATUS_C, STATUS_D -> { } // read-only
                case STATUS_A -> ram[STATUS_A] = (byte) (value & 0x7f); // UIP is read-only
                default -> ram[index] = (byte) value; // time writes are accepted and ignored
            }
        }
    }

    // ------------------------------------------------------------------ snapshot state

    @Override
    public void saveState(DataOutput out) throws IOException {
        out.write(ram);
        out.writeInt(index);
    }

    @Override
    public void restoreState(DataInput in) throws IOException {
        in.readFully(ram);
        index = in.readInt() & 0x7f;
    }
}
