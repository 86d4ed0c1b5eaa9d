package dev.kpemu.boot;

/**
 * Bytes typed into the guest command's terminal, delivered on the virtual clock: the boot runner
 * asks every {@link #POLL_NANOS} of guest time (an event on the machine's clock, so the points
 * where input can arrive are the same in every run) and puts what it gets into the terminal
 * UART's receive FIFO (what does not fit waits for the next poll). A live source (a terminal)
 * answers with what the user typed since the last poll and may hold the guest back to host time
 * while it idles; a replayed source answers with the bytes recorded at or before that guest time,
 * so a replay reaches the guest at the same points as the recording.
 */
public interface TerminalInput {
    /** Guest time between two polls: 10 ms. */
    long POLL_NANOS = 10_000_000L;

    /** The bytes to deliver at guest time {@code guestNanos} (empty when none). */
    byte[] take(long guestNanos);
}
