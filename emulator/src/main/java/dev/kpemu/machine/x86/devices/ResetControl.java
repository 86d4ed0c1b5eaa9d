package dev.kpemu.machine.x86.devices;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

import dev.kpemu.machine.Device;

/**
 * The PC's reset paths: the 8042 keyboard controller's "pulse reset line" command (0xfe written
 * to port 0x64) and the PCI reset control register (0xcf9, bit 2 = reset CPU). Port 0x64 reads
 * as 0xff, which Linux's i8042 driver takes as "no controller" without waiting. Port 0x60 is
 * claimed so that no other device answers it.
 */
public final class ResetControl implements Device.PortIo, dev.kpemu.machine.Stateful {
    public static final int KBD_DATA = 0x60, KBD_STATUS_CMD = 0x64, RESET_CONTROL = 0xcf9;
    public static final int KBD_CMD_PULSE_RESET = 0xfe, RCR_SYS_RESET = 0x02, RCR_RESET_CPU = 0x04;

    private final Runnable onReset;
    private int rcr;

    public ResetControl(Runnable onReset) { this.onReset = onReset; }

    @Override public String name() { return "reset-control"; }

    @Override public void reset() { rcr = 0; }

    @Override
    public int in(int port, int size) {
        return port == RESET_CONTROL ? rcr : 0xff;
    }

    @Override
    public void out(int port, int size, int value) {
        int v = value & 0xff;
        if (port == KBD_STATUS_CMD && v == KBD_CMD_PULSE_RESET) onReset.run();
        if (port == RESET_CONTROL) {
            if ((v & RCR_RESET_CPU) != 0) onReset.run();
            rcr = v & RCR_SYS_RESET;
        }
    }

    // ------------------------------------------------------------------ snapshot state

    @Override
    public void saveState(DataOutput out) throws IOException { out.writeInt(rcr); }

    @Override
    public void restoreState(DataInput in) throws IOException { rcr = in.readInt(); }
}
