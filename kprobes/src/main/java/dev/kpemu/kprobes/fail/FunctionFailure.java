package dev.kpemu.kprobes.fail;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

import dev.kpemu.kprobes.Kprobe;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.kprobes.Regs;
import dev.kpemu.kprobes.SymbolResolver;

/**
 * One {@link FailSpec} armed on an engine, as Linux's fail_function arms its kprobe
 * (kernel/fail_function.c {@code fei_kprobe_handler}): a probe at the function's entry whose
 * pre handler asks {@link FaultAttr#shouldFail} and, on yes, makes the function return the
 * spec's value without running its body ({@link Kprobes#overrideFunctionWithReturn}) and
 * reports the injection. Checking the function against the error-injection list is the
 * caller's business.
 */
public final class FunctionFailure {
    /** Linux's fail_dump name of fail_function's attribute directory. */
    public static final String NAME = "fail_function";
    /** Where an exec has the new program in place and the task's pid ({@code after=exec} counts from its entry). */
    public static final String EXEC_POINT = "setup_new_exec";
    /** lib/fault-inject.c's MAX_STACK_TRACE_DEPTH. */
    static final int STACK_DEPTH = 32;

    /** The current task at a hit, as the guest's {@code current} says. */
    public interface TaskView {
        String comm(Regs regs);

        int pid(Regs regs);

        /** Whether the current task is {@code pid} or descends from it ({@code real_parent}s); default: it is {@code pid}. */
        default boolean descendsFrom(Regs regs, int pid) { return pid(regs) == pid; }
    }

    /**
     * One injection: where, for whom, and Linux's fail_dump text ({@code dump}, empty at
     * verbose 0; at verbose 2 with its {@code Call Trace:}); {@code stack} the return addresses,
     * innermost first, from the function's caller; {@code address} the function's entry.
     */
    public record Injection(String function, long retval, String comm, int pid, List<Long> stack, String dump, int verbose, long address) {}

    private final FailSpec spec;
    private final Kprobe probe;
    private final List<Injection> injections = new ArrayList<>();
    private long calls;

    private FunctionFailure(FailSpec spec, Kprobe probe) {
        this.spec = spec;
        this.probe = probe;
    }

    /** Registers the entry probe of {@code spec.function()} on {@code kprobes}; {@code onInjection} runs at each failure. */
    public static FunctionFailure arm(Kprobes kprobes, SymbolResolver symbols, FailSpec spec, long seed, TaskView task,
                                      java.util.function.Consumer<Injection> onInjection) {
        return arm(kprobes, symbols, spec, seed, task, onInjection, false);
    }

    /**
     * As {@link #arm(Kprobes, SymbolResolver, FailSpec, long, TaskView, java.util.function.Consumer)};
     * with {@code after=exec} a probe at {@value #EXEC_POINT}'s entry notes the {@code tree=} task's
     * exec, or {@code execSeen}: the engine is armed where that exec has begun (a snapshot taken at
     * its {@value #EXEC_POINT}), so the tree's calls count from the start.
     */
    public static FunctionFailure arm(Kprobes kprobes, SymbolResolver symbols, FailSpec spec, long seed, TaskView task,
                                      java.util.function.Consumer<Injection> onInjection, boolean execSeen) {
        Objects.requireNonNull(onInjection);
        FaultAttr attr = spec.attr(seed);
        if (attr.afterExec()) {
            if (execSeen) {
                attr.execSeen();
            } else {
                int tree = attr.tree();
                kprobes.register(Kprobe.at(EXEC_POINT, 0).pre((kp, regs) -> {
                    if (task.pid(regs) == tree) attr.execSeen();
                    return 0;
                }));
            }
        }
        FunctionFailure[] self = new FunctionFailure[1];
        Kprobe p = Kprobe.at(spec.function(), 0).pre((kp, regs) -> {
            self[0].calls++;
            List<Long> stack = callers(kprobes, regs);
            String comm = task.comm(regs);
            int pid = task.pid(regs);
            FaultAttr.Call call = new FaultAttr.Call() {
                @Override public String comm() { return comm; }
                @Override public int pid() { return pid; }
                @Override public boolean descendsFrom(int ancestor) { return task.descendsFrom(regs, ancestor); }
                @Override public boolean hasCaller(String symbol) {
                    for (long a : stack) {
                        if (symbols.lookup(a).map(s -> s.name().equals(symbol)).orElse(false)) return true;
                    }
                    return false;
                }
            };
            if (!attr.shouldFail(call)) return 0;
            long entry = kp.address();
            String dump = attr.dump(NAME);
            if (attr.verbose() > 1) dump += callTrace(symbols, entry, stack);
            attr.consumeTime();
            kprobes.overrideFunctionWithReturn(regs, spec.retval());
            Injection i = new Injection(spec.function(), spec.retval(), comm, pid, stack, dump, attr.verbose(), entry);
            self[0].injections.add(i);
            onInjection.accept(i);
            return 1;
        }).post((kp, regs, flags) -> {
            // empty, as fail_function's fei_post_handler: a probe with a post handler is not
            // jump-optimized, and only a breakpoint's path can be sent elsewhere by the pre handler
        });
        self[0] = new FunctionFailure(spec, p);
        kprobes.register(p);
        return self[0];
    }

    /**
     * verbose 2: in place of the {@code dump_stack()} Linux's fail_dump calls, {@code Call Trace:}
     * and the failed function's entry, then its callers (the frame-pointer chain), one
     * {@code  SYMBOL+0xOFF/0xSIZE} a line as Linux prints them; the frames of Linux's own handlers
     * (dump_stack, should_fail, the kprobe and int3 handlers) are not there: kpemu's run on the host.
     */
    static String callTrace(SymbolResolver symbols, long entry, List<Long> stack) {
        StringBuilder sb = new StringBuilder("Call Trace:\n");
        sb.append(' ').append(frame(symbols, entry)).append('\n');
        for (String f : knownFrames(symbols, stack)) sb.append(' ').append(f).append('\n');
        return sb.toString();
    }

    /**
     * {@code stack} as {@link #frame}s up to the first address in no symbol: a kernel built
     * without frame pointers (Debian's x86-64, ORC) leaves the walk beyond a function that keeps
     * none, so the rest of the chain is not the caller's.
     */
    public static List<String> knownFrames(SymbolResolver symbols, List<Long> stack) {
        List<String> out = new ArrayList<>();
        for (long a : stack) {
            if (symbols.lookup(a).isEmpty()) break;
            out.add(frame(symbols, a));
        }
        return out;
    }

    /** {@code SYMBOL+0xOFF/0xSIZE} (Linux's %pS), or the address in hex. */
    public static String frame(SymbolResolver symbols, long address) {
        return symbols.lookup(address).map(s -> s.name() + "+0x" + Long.toHexString(address - s.start()) + "/0x" + Long.toHexString(s.size()))
                .orElse("0x" + Long.toHexString(address));
    }

    /**
     * At the entry: the caller's return address (x86 {@code [sp]}, arm64 {@code lr}, which a
     * frame-pointer walk from the entry does not show yet) and then the frame-pointer chain.
     */
    public static List<Long> callers(Kprobes kprobes, Regs regs) {
        long[] trace = kprobes.stackTrace(regs, STACK_DEPTH);
        long ret = kprobes.returnAddressAtEntry(regs);
        List<Long> out = new ArrayList<>();
        out.add(ret);
        for (int i = 1; i < trace.length && out.size() < STACK_DEPTH; i++) if (trace[i] != ret) out.add(trace[i]);
        return out;
    }

    public FailSpec spec() { return spec; }

    public Kprobe probe() { return probe; }

    /** Entries of the function seen so far (every task). */
    public long calls() { return calls; }

    public List<Injection> injections() { return List.copyOf(injections); }
}
