package dev.kpemu.boot;

import java.io.IOException;
import java.util.ArrayDeque;

import dev.kpemu.machine.Machine;
import dev.kpemu.machine.VirtualClock;

/**
 * Feeds a {@link TerminalInput} into the terminal UART on the virtual clock: an event every
 * {@link TerminalInput#POLL_NANOS} of guest time takes the input's bytes, puts as many as the
 * receive FIFO holds into the UART (raising its receive interrupt) and keeps the rest for the
 * next poll (then 1 ms later, so a paste drains quickly). It also flushes the terminal's output,
 * so a prompt without a newline shows. Every run sees the same poll times, which is what makes a
 * recorded input replay the same way.
 */
final class TerminalFeed implements VirtualClock.Event {
    /** The next poll while bytes wait for FIFO space. */
    static final long DRAIN_NANOS = 1_000_000L;

    private final Machine machine;
    private final LinuxGuest.TerminalPort port;
    private final GuestTerminal terminal;
    private final ArrayDeque<Byte> waiting = new ArrayDeque<>();

    private TerminalFeed(Machine machine, LinuxGuest.TerminalPort port, GuestTerminal terminal) {
        this.machine = machine;
        this.port = port;
        this.terminal = terminal;
    }

    static void start(Machine m, LinuxGuest.TerminalPort port, GuestTerminal terminal) {
        if (port == null) throw new IllegalStateException("the guest has no terminal UART");
        m.clock().schedule(TerminalInput.POLL_NANOS, new TerminalFeed(m, port, terminal));
    }

    @Override public void fire(long now) {
        for (byte b : terminal.input().take(now)) waiting.add(b);
        int n = Math.min(waiting.size(), port.receiveSpace());
        if (n > 0) {
            byte[] chunk = new byte[n];
            for (int i = 0; i < n; i++) chunk[i] = waiting.poll();
            port.receive(chunk);
        }
        try {
            terminal.output().flush();
        } catch (IOException e) {
            // the terminal's sink went away; the guest goes on
        }
        machine.clock().schedule(now + (waiting.isEmpty() ? TerminalInput.POLL_NANOS : DRAIN_NANOS), this);
    }
}
