package dev.kpemu.cli;

import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.LongSupplier;

/**
 * A one-line progress report on standard error for boots longer than {@value #AFTER_MILLIS} ms
 * (host time): guest seconds and events so far, rewritten in place every second and erased at the
 * end. Only when standard error is a terminal, and only when the guest console is not written
 * there too; otherwise nothing is printed at all.
 */
final class Progress implements AutoCloseable {
    static final long AFTER_MILLIS = 3000, EVERY_MILLIS = 1000;

    private final Thread thread;
    private final PrintStream err;
    private volatile boolean done, shown;

    private Progress(PrintStream err, String what, LongSupplier guestNanos, LongSupplier events) {
        this.err = err;
        this.thread = Thread.ofPlatform().daemon().name("kpemu-progress").unstarted(() -> {
            try {
                Thread.sleep(AFTER_MILLIS);
                while (!done) {
                    long ns = guestNanos.getAsLong();
                    if (ns >= 0) {
                        synchronized (err) {
                            if (done) break;
                            err.printf("\r\033[K%s: guest %.2f s, %d events", what, ns / 1e9, events.getAsLong());
                            err.flush();
                            shown = true;
                        }
                    }
                    Thread.sleep(EVERY_MILLIS);
                }
            } catch (InterruptedException e) {
                // closing
            }
        });
    }

    /** Starts a report when standard error is a terminal and {@code consoleOnStderr} is false; else a no-op. */
    static Progress start(String what, boolean consoleOnStderr, LongSupplier guestNanos, LongSupplier events) {
        Progress p = new Progress(System.err, what, guestNanos, events);
        if (!consoleOnStderr && stderrIsTerminal()) p.thread.start();
        return p;
    }

    /** Standard error is a terminal: on Linux, fd 2 is a tty device; elsewhere the JDK's console says. */
    static boolean stderrIsTerminal() {
        if ("0".equals(System.getenv("KPEMU_PROGRESS"))) return false;
        try {
            String target = Files.readSymbolicLink(Path.of("/proc/self/fd/2")).toString();
            return target.startsWith("/dev/pts/") || target.startsWith("/dev/tty");
        } catch (Exception e) {
            var c = System.console();
            return c != null && c.isTerminal();
        }
    }

    @Override public void close() {
        done = true;
        thread.interrupt();
        synchronized (err) {
            if (shown) {
                err.print("\r\033[K");
                err.flush();
            }
        }
    }
}
