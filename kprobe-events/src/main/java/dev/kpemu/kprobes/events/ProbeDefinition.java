package dev.kpemu.kprobes.events;

/** One parsed {@code kprobe_events} command. */
public sealed interface ProbeDefinition permits KprobeDef, KretprobeDef, FprobeDef, WprobeDef, DeleteDef {
    /** The group ({@code kprobes} by default; null for a delete without group). */
    String group();

    /** The event name (for a delete: empty means every event of the group). */
    String event();

    /** The command as the kernel echoes it (tokens joined by single spaces). */
    String command();
}
