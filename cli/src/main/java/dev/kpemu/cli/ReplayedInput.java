package dev.kpemu.cli;

import java.io.ByteArrayOutputStream;
import java.util.List;

import dev.kpemu.boot.HostStop;
import dev.kpemu.boot.TerminalInput;

/**
 * {@code boot --input FILE}: a recorded session's bytes delivered at their guest times (each at
 * the first poll at or after its time), and its end (a {@code stop} entry) stopping the boot
 * there; two replays of one file give the same guest run.
 */
final class ReplayedInput implements TerminalInput {
    private final List<InputScript.Entry> entries;
    private final HostStop stop;
    private int next;

    ReplayedInput(List<InputScript.Entry> entries, HostStop stop) {
        this.entries = List.copyOf(entries);
        this.stop = stop;
    }

    @Override public byte[] take(long guestNanos) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        while (next < entries.size() && entries.get(next).guestNanos() <= guestNanos) {
            InputScript.Entry e = entries.get(next++);
            if (e.stop()) {
                stop.request("end of the recorded input");
                break;
            }
            out.writeBytes(e.bytes());
        }
        return out.toByteArray();
    }
}
