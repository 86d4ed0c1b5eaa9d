package dev.kpemu.kprobes.events.hist;

/**
 * A hist trigger Linux refuses. When the kernel logs the refusal ({@code hist_err}), the error
 * text of {@code trace_events_hist.c}'s table, the command ({@code hist:} and what followed it)
 * and the caret position within it make {@link #errorLog}; otherwise the write just fails
 * ({@code -EINVAL}) and {@link #logged()} is false.
 */
public final class HistTriggerException extends Exception {
    private static final String CMD_PREFIX = "  Command: ";
    private final boolean logged;
    private final String command;
    private final int position;
    /** The error_log entry of the trigger's filter, when that is what the kernel logged. */
    private final String filterLog;

    /** Refused and logged: {@code error} at {@code position} of {@code command}. */
    HistTriggerException(String error, String command, int position) {
        super(error);
        this.logged = true;
        this.command = command;
        this.position = position;
        this.filterLog = null;
    }

    /** Refused for its filter, the kernel logging the filter's parse error ({@code entry}, 6.12 and later). */
    HistTriggerException(String message, String filterErrorLog) {
        super(message);
        this.logged = true;
        this.command = null;
        this.position = 0;
        this.filterLog = filterErrorLog;
    }

    /** Refused without an error_log entry. */
    public HistTriggerException(String message) {
        super(message);
        this.logged = false;
        this.command = null;
        this.position = 0;
        this.filterLog = null;
    }

    public boolean logged() { return logged; }

    /**
     * The error_log entry without its timestamp, as Linux 6.1 prints it for the event
     * {@code group/event}: {@code hist:GROUP:EVENT: error: TEXT}, the command, the caret line.
     */
    public String errorLog(String group, String event) {
        if (!logged) return "";
        if (filterLog != null) return filterLog;
        return "hist:" + group + ":" + event + ": error: " + getMessage() + "\n" + CMD_PREFIX + command + "\n"
                + " ".repeat(CMD_PREFIX.length() + position) + "^\n";
    }
}
