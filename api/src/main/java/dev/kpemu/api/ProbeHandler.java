package dev.kpemu.api;

/**
 * A Java handler, run on the emulation thread while the guest is stopped at the probe. What it
 * throws is recorded in the session ({@link SessionResult#handlerFailures()}) and the guest goes on,
 * as Linux's kprobes would go on; the JUnit extension fails the test for it.
 */
@FunctionalInterface
public interface ProbeHandler {
    void handle(ProbeContext ctx) throws Exception;
}
