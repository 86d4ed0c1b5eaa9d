package dev.kpemu.kprobes.events.filter;

/**
 * A filter Linux refuses ({@code kernel/trace/trace_events_filter.c}): the parse error and
 * where it is, as the event's {@code filter} file shows it afterwards and {@code error_log}
 * logs it ({@code event filter parse error}).
 */
public final class FilterParseException extends Exception {
    /** The kernel's {@code err_text[]} entries a filter on a kprobe event can meet. */
    public enum Error {
        NONE("No error"), INVALID_OP("Invalid operator"), TOO_MANY_OPEN("Too many '('"), TOO_MANY_CLOSE("Too few '('"),
        MISSING_QUOTE("Missing matching quote"), MISSING_BRACE_OPEN("Missing '{'"), MISSING_BRACE_CLOSE("Missing '}'"),
        OPERAND_TOO_LONG("Operand too long"),
        EXPECT_STRING("Expecting string field"), EXPECT_DIGIT("Expecting numeric field"),
        ILLEGAL_FIELD_OP("Illegal operation for field type"), FIELD_NOT_FOUND("Field not found"),
        ILLEGAL_INTVAL("Illegal integer value"), TOO_MANY_PREDS("Too many terms in predicate expression"),
        INVALID_FILTER("Meaningless filter expression"), INVALID_CPULIST("Invalid cpulist"),
        INVALID_VALUE("Invalid value (did you forget quotes)?"),
        NO_FILTER("No filter found");

        final String text;

        Error(String text) { this.text = text; }

        public String text() { return text; }
    }

    private final String filter;
    private final Error error;
    private final int position;

    /** @param error null for a failure the kernel reports without a parse error ({@code Error: (0)}) */
    FilterParseException(String filter, Error error, int position) {
        super(error == null ? "Error: (0)" : error.text);
        this.filter = filter;
        this.error = error;
        this.position = position;
    }

    public String filter() { return filter; }

    /** The parse error, or null when the kernel gives none (it prints {@code Error: (0)}). */
    public Error error() { return error; }

    /** The kernel's {@code lasterr_pos}: the index the error was found at. */
    public int position() { return position; }

    /**
     * The error_log entry without its timestamp ({@code tracing_log_err} from
     * {@code append_filter_err}): {@code event filter parse error: error: TEXT}, the filter as the
     * command, a caret under the error's position; a failure without a parse error logs
     * {@code Error} at 0.
     */
    public String errorLog() {
        String prefix = "  Command: ";
        return "event filter parse error: error: " + (error == null ? "Error" : error.text) + "\n" + prefix + filter + "\n"
                + " ".repeat(prefix.length() + (error == null ? 0 : position)) + "^\n";
    }

    /**
     * What reading the event's {@code filter} file shows after the refused write
     * ({@code append_filter_err}): the filter, a caret under the error, the message; then the
     * file's own newline.
     */
    public String filterFileText() {
        if (error == null) return filter + "\nError: (0)\n\n";
        int pos = Math.min(position, filter.length());
        if (pos > 0) pos++;
        String caret = pos == 0 ? "^" : " ".repeat(pos - 1) + "^";
        return filter + "\n" + caret + "\nparse_error: " + error.text + "\n\n";
    }
}
