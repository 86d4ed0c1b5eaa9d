package dev.kpemu.api;

import java.nio.file.Path;
import java.util.List;

/**
 * How a session's boot ended.
 *
 * @param outcome          how it ended ({@link Outcome#exitCode()} is the CLI's exit code for it)
 * @param status           one line: "guest powered off", "timeout after 5.000 guest seconds", the refused definition's error, ...
 * @param guestNanos       guest time at the end
 * @param commandExit      the exit status of the guest command ({@link KpemuSession.Builder#command}), null when none was reported
 * @param commandOutput    what the command wrote (stdout and stderr), when no other sink was given
 * @param consoleTail      the kernel console's last lines
 * @param traceLines       the kprobe_events trace lines, in ftrace's format (when the session keeps them); the guest's
 *                         bytes that are not UTF-8 as {@link dev.kpemu.kprobes.events.GuestText} carries them
 *                         ({@code GuestText.encode(line)}: the bytes Linux's trace shows)
 * @param handlerFailures  every Java handler that threw
 * @param snapshot         what the session did with its {@link KpemuSession.Builder#snapshot snapshot}, null without one
 */
public record SessionResult(Outcome outcome, String status, long guestNanos, Integer commandExit, String commandOutput,
                            List<String> consoleTail, List<String> traceLines, List<HandlerFailure> handlerFailures,
                            Snapshot snapshot) {
    /**
     * A session's snapshot: {@code restored} when the session started from {@code file}, else the
     * session booted cold and saved it there ({@code file} null when saving failed: the session
     * went on, the notice says why).
     */
    public record Snapshot(boolean restored, Path file) {}

    public SessionResult {
        consoleTail = List.copyOf(consoleTail);
        traceLines = List.copyOf(traceLines);
        handlerFailures = List.copyOf(handlerFailures);
    }

    /** Throws an AssertionError (caused by the first failure) when any handler threw. */
    public SessionResult assertNoHandlerFailures() {
        if (handlerFailures.isEmpty()) return this;
        AssertionError e = new AssertionError(handlerFailures.size() + " handler failure(s); first: " + handlerFailures.get(0),
                handlerFailures.get(0).error());
        for (int i = 1; i < handlerFailures.size(); i++) e.addSuppressed(handlerFailures.get(i).error());
        throw e;
    }
}
