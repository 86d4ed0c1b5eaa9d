package dev.kpemu.api;

/**
 * A Java handler that threw: which probe, which handler ({@code pre}, {@code post}, {@code entry},
 * {@code return}), the guest time of the hit and what it threw. The guest went on. Handlers
 * registered on the engine itself ({@link KpemuSession.Ready#kprobes()}) are reported once, at the
 * end, with a null probe, the engine's count and its last failure.
 */
public record HandlerFailure(Probe probe, String handler, long guestNanos, Throwable error) {
    @Override public String toString() {
        return probe + ": " + handler + " handler threw " + error + " at " + guestNanos + " ns";
    }
}
