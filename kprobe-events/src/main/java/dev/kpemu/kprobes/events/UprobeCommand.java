package dev.kpemu.kprobes.events;

/** One parsed {@code uprobe_events} command: a probe ({@link UprobeDef}) or a delete. */
public sealed interface UprobeCommand permits UprobeDef, UprobeCommand.Delete {
    /** {@code -:[GRP/]EVENT [PATH:OFFSET [ARGS]]} ({@code dyn_event_release}, as for kprobes). */
    record Delete(DeleteDef delete) implements UprobeCommand {}
}
