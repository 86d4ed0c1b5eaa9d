package dev.kpemu.machine;

/** Why {@link Machine#run} returned. */
public sealed interface StopReason {
    /** The guest turned the machine off (PSCI SYSTEM_OFF, ACPI/port power-off, a test device). */
    record PoweredOff(int code) implements StopReason {}

    /** The guest halted with interrupts off and nothing can wake it (x86 HLT with IF=0, arm64 WFI masked). */
    record Halted(long pc) implements StopReason {}

    /** The guest asked for a reset. */
    record Reset() implements StopReason {}

    /** The host asked the machine to stop (e.g. from a handler). */
    record HostRequest(String why) implements StopReason {}

    /**
     * A host breakpoint ({@link Machine#addBreakpoint}) was reached by vCPU {@code cpu} (the
     * machine's current vCPU when the run returns); the instruction there has not run.
     */
    record Breakpoint(long address, int cpu) implements StopReason {
        /** Reached by vCPU 0 (the only one of a one-vCPU machine). */
        public Breakpoint(long address) { this(address, 0); }
    }

    /**
     * A watchpoint's handler asked to stop at {@code hit} ({@link Watchpoints#stopAt}): the run returns
     * at the end of the translated block that made the access, the access and the block's
     * instructions before the boundary done.
     */
    record Watchpoint(WatchHit hit) implements StopReason {}

    /** Guest time reached the limit the host set ({@code nanos}: the guest time at the stop). */
    record GuestTimeLimit(long nanos) implements StopReason {}

    /** The instruction budget given to {@link Machine#run} was used up. */
    record BudgetExhausted() implements StopReason {}

    /** The guest cannot go on: an exception it cannot take (no handler, triple fault) or an engine error. */
    record GuestError(String message, long pc) implements StopReason {}
}
