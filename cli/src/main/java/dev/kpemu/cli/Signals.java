package dev.kpemu.cli;

import java.util.ArrayList;
import java.util.List;

import sun.misc.Signal;
import sun.misc.SignalHandler;

import dev.kpemu.boot.HostStop;

/**
 * SIGINT and SIGTERM during a boot: instead of killing the JVM mid-run, they ask the boot to stop
 * at the next safe point ({@link HostStop}), so the trace is flushed and the tables printed; the
 * exit code is then 128 + the signal's number (130, 143), as a shell reports a process the signal
 * killed. {@link #close} puts the JVM's handlers back.
 */
final class Signals implements AutoCloseable {
    private record Installed(Signal signal, SignalHandler previous) {}

    private final List<Installed> installed = new ArrayList<>();
    private volatile Signal caught;

    private Signals() {}

    /** Handles SIGINT and SIGTERM until closed. */
    static Signals stopOn(HostStop stop) {
        Signals s = new Signals();
        for (String name : List.of("INT", "TERM")) {
            Signal sig = new Signal(name);
            try {
                SignalHandler prev = Signal.handle(sig, x -> {
                    if (s.caught == null) s.caught = x;
                    stop.request("SIG" + x.getName());
                });
                s.installed.add(new Installed(sig, prev));
            } catch (IllegalArgumentException e) {
                // the JVM keeps this signal (-Xrs): it keeps its default action
            }
        }
        return s;
    }

    /** The first signal caught, or null. */
    String caught() { return caught == null ? null : "SIG" + caught.getName(); }

    /** 128 + the caught signal's number (SIGINT 130, SIGTERM 143); 1 if none was caught. */
    int exitCode() { return caught == null ? ExitCodes.ERROR : 128 + caught.getNumber(); }

    @Override public void close() {
        for (Installed i : installed) Signal.handle(i.signal(), i.previous());
    }
}
