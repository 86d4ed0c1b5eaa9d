package dev.kpemu.cli;

/**
 * One difference between Linux's and kpemu's answer to a fuzz set.
 *
 * @param kind       {@code refusal} (accepted by one, refused by the other), {@code error_log} (both
 *                   refused, other messages) or {@code event} (the traces, event by event)
 * @param definition the definition the difference belongs to ("" when no one definition does)
 * @param function   the probed function (its symbol, offset dropped; "" when unknown)
 * @param field      what differs ({@code TraceComparator}'s field names for events: "argument a0",
 *                   "event", "probe point", ...)
 * @param index      the event's index in the workload's window (-1 for refusals)
 */
public record FuzzDifference(String kind, String definition, String function, String field, String linux, String kpemu, int index) {
    /** The field without what varies between two instances of one class ("argument a3" keeps its name). */
    String fieldKind() { return field; }

    @Override public String toString() {
        return kind + " " + field + (index >= 0 ? " at event " + index : "") + (function.isEmpty() ? "" : " (" + function + ")")
                + ": Linux " + linux + ", kpemu " + kpemu + (definition.isEmpty() ? "" : "  [" + definition + "]");
    }
}
