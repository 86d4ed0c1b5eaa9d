package dev.kpemu.api;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.StringJoiner;

import dev.kpemu.kprobes.fail.FailSpec;

/**
 * A function made to fail, the Java form of {@code kpemu boot --fail}:
 * {@code Fail.on("__x64_sys_openat").returning(-2).comm("cat").times(1)}, given to
 * {@link KpemuSession.Builder#fail}. Same attributes and semantics as the command's spec
 * (Linux's fail_function attributes plus kpemu's nth, comm, pid, caller); the values are checked
 * when the spec is built ({@link #spec()}), with the command's one-line messages.
 */
public final class Fail {
    private final String function;
    private long retval;
    private final Map<String, String> options = new LinkedHashMap<>();

    private Fail(String function) { this.function = Objects.requireNonNull(function); }

    public static Fail on(String function) { return new Fail(function); }

    public Fail returning(long value) { this.retval = value; return this; }

    public Fail nth(long n) { return put("nth", n); }

    /** How many failures; -1 unlimited (Linux's default 1). */
    public Fail times(int n) { return put("times", n); }

    public Fail interval(long n) { return put("interval", n); }

    /** Percent (default 100), drawn from the run's fixed seed. */
    public Fail probability(int percent) { return put("probability", percent); }

    public Fail space(int n) { return put("space", n); }

    public Fail comm(String name) { return put("comm", name); }

    public Fail pid(int pid) { return put("pid", pid); }

    public Fail caller(String symbol) { return put("caller", symbol); }

    public Fail verbose(int level) { return put("verbose", level); }

    private Fail put(String key, Object value) {
        options.put(key, String.valueOf(value));
        return this;
    }

    /** The spec as {@code --fail} takes it; IllegalArgumentException for a bad value. */
    public FailSpec spec() {
        StringJoiner j = new StringJoiner(",");
        j.add(function + "=" + retval);
        options.forEach((k, v) -> j.add(k + "=" + v));
        return FailSpec.parse(j.toString());
    }
}
