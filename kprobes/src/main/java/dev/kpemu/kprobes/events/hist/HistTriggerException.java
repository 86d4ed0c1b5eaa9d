package dev.kpemu.kprobes.events.hist;

/** A trigger Linux refuses: the hist error's text ({@code trace_events_hist.c}'s {@code err_text}) or the filter's parse error. */
public final class HistTriggerException extends Exception {
    public HistTriggerException(String message) { super(message); }
}
