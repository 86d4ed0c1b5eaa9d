package dev.kpemu.api;

import java.util.LinkedHashMap;
import java.util.Map;

import dev.kpemu.kprobes.Regs;
import dev.kpemu.kprobes.events.EventArg;
import dev.kpemu.kprobes.events.TraceRecord;

/**
 * One hit of a {@link Uprobe} or {@link Uretprobe}, valid during its handler: the task, the user
 * registers (live: the probed instruction has not run; at a return, the function has returned),
 * the fetch arguments' values, the trace line Linux would print.
 */
public final class UprobeHit {
    private final UserProbe probe;
    private final TraceRecord record;
    private final Regs regs;

    UprobeHit(UserProbe probe, TraceRecord record, Regs regs) {
        this.probe = probe;
        this.record = record;
        this.regs = regs;
    }

    public UserProbe probe() { return probe; }

    public boolean isReturn() { return record.isReturn(); }

    /** The probed address in the process (for a return: the function's address). */
    public long address() { return record.ip(); }

    /** For a return: the address returned to; else 0. */
    public long returnAddress() { return record.retIp(); }

    public int pid() { return record.context().pid(); }

    public String comm() { return record.context().comm(); }

    public int cpu() { return record.context().cpu(); }

    /** A user register by the kprobe API's names (x86-64 {@code rax}, {@code rsp}, {@code rip}...; arm64 {@code x0}, {@code sp}, {@code pc}). */
    public long reg(String name) { return regs.get(name); }

    /** The stack pointer. */
    public long sp() { return regs.sp(); }

    /** x86-64 {@code rax}, arm64 {@code x0}: the return value at a {@link Uretprobe}'s hit. */
    public long returnValue() { return regs.returnValue(); }

    /** A fetch argument's value by name ({@code arg1}... or the given name): a Long, String, byte[] or List. */
    public Object arg(String name) {
        EventArg a = record.arg(name);
        if (a == null) throw new IllegalArgumentException("no fetch argument " + name + " in " + probe);
        return a.value();
    }

    /** Every fetch argument by name, in order. */
    public Map<String, Object> args() {
        Map<String, Object> m = new LinkedHashMap<>();
        for (EventArg a : record.args()) m.put(a.name(), a.value());
        return m;
    }

    /** The trace line, as Linux prints it. */
    public String line() { return record.line(); }
}
