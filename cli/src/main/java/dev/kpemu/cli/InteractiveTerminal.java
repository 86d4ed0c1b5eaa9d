package dev.kpemu.cli;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.jline.terminal.Attributes;
import org.jline.terminal.Terminal;
import org.jline.terminal.TerminalBuilder;

import dev.kpemu.boot.HostStop;
import dev.kpemu.boot.TerminalInput;

/**
 * {@code boot -i}: the host terminal (JLine, raw mode) as the guest command's terminal. Every key
 * goes to the guest as typed (Ctrl-C too: the guest's tty turns it into SIGINT), except the escape
 * {@code Ctrl-A} ({@link TerminalEscape}: {@code Ctrl-A x} stops kpemu). Output processing is left
 * on, so kpemu's own trace lines still start at the left margin.
 *
 * <p>A reader thread collects the keys; the boot takes them at its terminal polls
 * ({@link TerminalInput}), so input reaches the guest on the virtual clock, and
 * {@code --record-input} writes each delivery with its guest time. While the guest idles its clock
 * would race ahead of the user: each poll holds the guest back to host time (waiting for a key at
 * most until host time catches up).
 */
final class InteractiveTerminal implements TerminalInput, AutoCloseable {
    private static final byte[] STOP = new byte[0];

    private final Terminal terminal;
    private final Attributes saved;
    private final LinkedBlockingQueue<byte[]> keys = new LinkedBlockingQueue<>();
    private final HostStop stop;
    private final InputScript.Writer record;
    private long hostStart = -1, guestStart;

    private InteractiveTerminal(Terminal terminal, HostStop stop, InputScript.Writer record) {
        this.terminal = terminal;
        this.stop = stop;
        this.record = record;
        this.saved = terminal.enterRawMode();
        Attributes raw = new Attributes(terminal.getAttributes());
        raw.setLocalFlag(Attributes.LocalFlag.ISIG, false);           // Ctrl-C, Ctrl-Z, Ctrl-\ go to the guest
        raw.setInputFlag(Attributes.InputFlag.IXON, false);
        raw.setInputFlag(Attributes.InputFlag.ICRNL, false);
        raw.setControlChar(Attributes.ControlChar.VMIN, 1);
        raw.setControlChar(Attributes.ControlChar.VTIME, 0);
        terminal.setAttributes(raw);
        Thread reader = new Thread(this::readKeys, "kpemu-terminal");
        reader.setDaemon(true);
        reader.start();
    }

    /** The process's terminal, or null when standard input (and standard output or error) are not one. */
    static InteractiveTerminal open(HostStop stop, InputScript.Writer record) throws IOException {
        // the terminal on stdout, or on stderr when stdout goes elsewhere (kpemu boot -i ... > trace.txt)
        Terminal t = TerminalBuilder.builder().system(true).systemOutput(TerminalBuilder.SystemOutput.SysOutOrSysErr)
                .nativeSignals(false).dumb(true).build();
        if (Terminal.TYPE_DUMB.equals(t.getType()) || Terminal.TYPE_DUMB_COLOR.equals(t.getType())) {
            t.close();
            return null;
        }
        return new InteractiveTerminal(t, stop, record);
    }

    /** Where the guest's terminal output goes: the terminal itself. */
    OutputStream output() { return terminal.output(); }

    private void readKeys() {
        InputStream in = terminal.input();
        TerminalEscape escape = new TerminalEscape();
        try {
            for (int c; (c = in.read()) >= 0; ) {
                switch (escape.key(c)) {
                    case SEND -> keys.add(new byte[] {(byte) c});
                    case STOP -> {
                        keys.add(STOP);
                        return;
                    }
                    case HELP -> {
                        terminal.writer().print("\r\n" + TerminalEscape.HELP + "\r\n");
                        terminal.writer().flush();
                    }
                    case NONE -> { }
                }
            }
        } catch (IOException e) {
            // the terminal went away: no more input
        }
    }

    @Override public byte[] take(long guestNanos) {
        if (hostStart < 0) {
            hostStart = System.nanoTime();
            guestStart = guestNanos;
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        boolean stopNow = drain(out);
        long ahead = (guestNanos - guestStart) - (System.nanoTime() - hostStart);
        if (!stopNow && out.size() == 0 && ahead > 0) {
            try {
                byte[] k = keys.poll(ahead, TimeUnit.NANOSECONDS);
                if (k != null) {
                    if (k == STOP) stopNow = true;
                    else out.writeBytes(k);
                    stopNow |= drain(out);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        byte[] b = out.toByteArray();
        if (record != null && b.length > 0) record.add(new InputScript.Entry(guestNanos, b, false));
        if (stopNow) {
            if (record != null) record.add(new InputScript.Entry(guestNanos, new byte[0], true));
            stop.request("Ctrl-A x");
        }
        return b;
    }

    /** Moves the waiting keys to {@code out}; true when the escape to stop came. */
    private boolean drain(ByteArrayOutputStream out) {
        for (byte[] k; (k = keys.poll()) != null; ) {
            if (k == STOP) return true;
            out.writeBytes(k);
        }
        return false;
    }

    @Override public void close() throws IOException {
        terminal.setAttributes(saved);
        terminal.flush();
        terminal.close();
    }
}
