package dev.kpemu.boot;

import dev.kpemu.machine.Machine;
import dev.kpemu.machine.StopReason;

/**
 * A request from outside the run loop to stop the guest: a signal handler (SIGINT, SIGTERM) or a
 * terminal's escape sequence. Any thread may call {@link #request}; the machine stops at its next
 * slice boundary ({@link Machine#requestStopFromAnyThread}), never from inside the engine, and the
 * boot ends with {@link StopReason.HostRequest} so the caller can still print what it collected.
 */
public final class HostStop {
    private volatile String reason;
    private volatile Machine machine;

    /** Asks the boot to stop; the first reason wins. */
    public void request(String why) {
        synchronized (this) {
            if (reason == null) reason = why;
        }
        Machine m = machine;
        if (m != null) m.requestStopFromAnyThread(new StopReason.HostRequest(reason));
    }

    /** Why the boot was asked to stop, or null. */
    public String reason() { return reason; }

    /** The boot runner hands over its machine before the first instruction. */
    void attach(Machine m) {
        machine = m;
        String r = reason;
        if (r != null) m.requestStopFromAnyThread(new StopReason.HostRequest(r));
    }
}
