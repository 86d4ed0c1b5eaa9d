package dev.kpemu.kprobes.events;

import dev.kpemu.kprobes.Errno;
import java.util.List;

/**
 * A rejected {@code kprobe_events} command: the errno the write returns and, when the kernel
 * logs one, the {@code error_log} entry with the kernel's message and caret position.
 *
 * <p>The caret position follows {@code __trace_probe_log_err}: the sum of
 * {@code strlen(argv[i]) + 1} over the tokens before the offending one, plus the offset inside
 * it; the command is the tokens re-joined with single spaces. Positions count bytes, as the
 * kernel does.
 */
public final class ProbeSyntaxException extends Exception {
    private static final long serialVersionUID = 1L;
    /** {@code CMD_PREFIX} in kernel/trace/trace.c. */
    static final String CMD_PREFIX = "  Command: ";

    private final KernelError error;
    private final Errno errno;
    private final String command;
    private final int position;
    private final String subsystem;
    /** An entry the same write logged before this one (Linux logs two for an fprobe's register fetch), or null. */
    private ProbeSyntaxException earlier;

    ProbeSyntaxException(KernelError error, Errno errno, String command, int position, String detail) {
        this(error, errno, command, position, detail, "trace_kprobe");
    }

    private ProbeSyntaxException(KernelError error, Errno errno, String command, int position, String detail, String subsystem) {
        super(error != null ? error.message() : detail);
        this.error = error;
        this.errno = errno;
        this.command = command;
        this.position = position;
        this.subsystem = subsystem;
    }

    /**
     * The same entry logged by another probe subsystem ({@code trace_probe_log_init}'s name:
     * {@code trace_fprobe} for fprobe and tracepoint probes, {@code dynevent} for
     * {@code dynamic_events} itself).
     */
    ProbeSyntaxException from(String subsystem) {
        ProbeSyntaxException e = new ProbeSyntaxException(error, errno, command, position, getMessage(), subsystem);
        e.earlier = earlier == null ? null : earlier.from(subsystem);
        return e;
    }

    /** This entry, logged after {@code first} by the same write (the error_log then holds both). */
    ProbeSyntaxException after(ProbeSyntaxException first) {
        this.earlier = first;
        return this;
    }

    /** The subsystem that logs the entry ({@code trace_kprobe}, {@code trace_fprobe}, {@code dynevent}). */
    public String subsystem() { return subsystem; }

    /** Builds the entry for tokens {@code argv} (byte strings), error at token {@code index} + {@code offset}. */
    static ProbeSyntaxException at(List<String> argv, int index, int offset, KernelError error, Errno errno) {
        int len = 0, pos = 0;
        for (int i = 0; i < argv.size(); i++) {
            if (i == index) pos = len;
            len += argv.get(i).length() + 1;
        }
        if (index >= argv.size()) {
            pos = len;
            offset = 0;
        }
        return new ProbeSyntaxException(error, errno, Bytes.decode(String.join(" ", argv)), pos + offset, null);
    }

    /** A rejection without an error_log entry (the kernel returns an errno and logs nothing). */
    static ProbeSyntaxException silent(String command, Errno errno, String detail) {
        return new ProbeSyntaxException(null, errno, command, -1, detail);
    }

    /**
     * For registration-time failures the engine detects (EVENT_EXIST, BAD_INSN_BNDRY,
     * FAIL_REG_PROBE, ...): the entry for {@code commandLine} split as the kernel splits it.
     */
    public static ProbeSyntaxException registration(String commandLine, int index, int offset,
                                                    KernelError error, Errno errno) {
        return at(Bytes.argvSplit(Bytes.encode(commandLine)), index, offset, error, errno);
    }

    /** As {@link #registration}, logged by {@code subsystem} ({@code trace_fprobe} for an fprobe or tracepoint probe). */
    public static ProbeSyntaxException registration(String commandLine, int index, int offset,
                                                    KernelError error, Errno errno, String subsystem) {
        return registration(commandLine, index, offset, error, errno).from(subsystem);
    }

    /** The logged error, or {@code null} when the kernel rejects the command without logging. */
    public KernelError error() { return error; }

    /** What {@code write(2)} fails with. */
    public Errno errno() { return errno; }

    /** The command as the error_log echoes it (tokens joined by single spaces), or the raw line when nothing is logged. */
    public String command() { return command; }

    /** Caret column inside the command (bytes), or -1 when nothing is logged. */
    public int position() { return position; }

    /** Whether the kernel would append an error_log entry. */
    public boolean logged() { return error != null; }

    /**
     * The error_log entry without its timestamp: {@code trace_kprobe: error: <msg>},
     * {@code   Command: <cmd>}, and the caret line, each ending in a newline; empty when
     * the kernel logs nothing.
     */
    public String errorLog() {
        if (error == null) return "";
        return (earlier != null ? earlier.errorLog() : "") + subsystem + ": error: " + error.message() + "\n" + CMD_PREFIX + command + "\n"
                + " ".repeat(CMD_PREFIX.length() + position) + "^\n";
    }

    /** The entry as {@code cat error_log} prints it, with the {@code [%5llu.%06u] } timestamp prefix. */
    public String errorLog(long timestampNanos) {
        if (error == null) return "";
        long sec = Long.divideUnsigned(timestampNanos, 1_000_000_000L);
        long nsec = Long.remainderUnsigned(timestampNanos, 1_000_000_000L);
        String own = subsystem + ": error: " + error.message() + "\n" + CMD_PREFIX + command + "\n"
                + " ".repeat(CMD_PREFIX.length() + position) + "^\n";
        return (earlier != null ? earlier.errorLog(timestampNanos) : "") + String.format("[%5d.%06d] ", sec, nsec / 1000) + own;
    }

    @Override
    public String toString() {
        return error != null ? errorLog() : "kprobe_events: " + getMessage() + " (" + errno + ")";
    }
}
