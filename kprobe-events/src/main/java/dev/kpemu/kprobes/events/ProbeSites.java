package dev.kpemu.kprobes.events;

import java.util.List;

/**
 * The probe-point checks Linux makes when a kprobe event is registered ({@code register_kprobe}
 * and trace_kprobe's own), answered before boot from the kernel's file: the instruction boundary,
 * the kprobe blacklist, functions ftrace cannot trace (trace_kprobe refuses "notrace" functions),
 * jump-label and static-call sites, and init text after boot.
 */
public interface ProbeSites {
    /**
     * What the kernel answers besides plain success: a refusal (the error_log entry and errno), or
     * an acceptance with a console message (error null), and the console lines it prints; a note
     * is kpemu's own remark about the answer (not the kernel's), e.g. that the running kernel decides.
     */
    record Answer(ProbeSyntaxException error, List<String> console, String note) {
        public Answer(ProbeSyntaxException error, List<String> console) { this(error, console, null); }

        public boolean accepted() { return error == null; }
    }

    /** Null when Linux would register the probe without a word. */
    Answer check(TraceProbe probe);

    /** Checks nothing (syntax-only checks, guests without tables). */
    static ProbeSites none() { return p -> null; }
}
