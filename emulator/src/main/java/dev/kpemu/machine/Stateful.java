package dev.kpemu.machine;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

/**
 * A part of the machine whose state a snapshot carries: every device, the interrupt controllers,
 * the arch machine's own bookkeeping. {@link #saveState} writes everything the part would need to
 * continue exactly where it is; {@link #restoreState} reads it back into a freshly built part of
 * the same machine (same wiring: interrupt lines and sinks are not state). A part's pending clock
 * events go through {@link VirtualClock#writeEvent} / {@link VirtualClock#readEvent}, so they fire
 * at the same guest time and in the same order as in the uninterrupted run. Parts restore
 * silently: they never raise lines or write to sinks while restoring (the other side's state is
 * restored too).
 */
public interface Stateful {
    void saveState(DataOutput out) throws IOException;

    void restoreState(DataInput in) throws IOException;
}
