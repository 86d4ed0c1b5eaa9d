package dev.kpemu.session;

import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.kprobes.Regs;
import dev.kpemu.kprobes.events.GuestText;
import dev.kpemu.kprobes.events.KernelSymbols;
import dev.kpemu.kprobes.events.MachineFetchContext;
import dev.kpemu.kprobes.events.TaskLayout;
import dev.kpemu.kprobes.events.TraceContext;
import dev.kpemu.kprobes.fail.FunctionFailure;
import dev.kpemu.machine.Machine;

/**
 * The guest's current task at a probe hit, as fault injection asks about it: comm, pid, whether
 * it descends from a given task ({@code real_parent} chain, from the kernel's BTF), and the
 * context columns of a trace line made at the hit. Without BTF: comm empty, pid 0, no ancestry.
 */
public final class GuestTasks implements FunctionFailure.TaskView {
    /** Deeper chains than this are not followed (a guest's tree is far shallower; a loop stops here). */
    private static final int MAX_DEPTH = 64;

    private final Machine machine;
    private final MachineFetchContext fetch;
    private final long realParentOffset, pidOffset;
    /** struct linux_binprm's {@code p} and {@code argc}, or -1. */
    private long binprmP = -1, binprmArgc = -1;

    private GuestTasks(Machine machine, MachineFetchContext fetch, long realParentOffset, long pidOffset) {
        this.machine = machine;
        this.fetch = fetch;
        this.realParentOffset = realParentOffset;
        this.pidOffset = pidOffset;
    }

    /** For the guest {@code machine} whose kernel's structures {@code structs} gives (null: none). */
    public static GuestTasks of(Machine machine, Kprobes kprobes, KernelStructs structs) {
        return of(machine, kprobes.regs(), structs);
    }

    /** As {@link #of(Machine, Kprobes, KernelStructs)} reading {@code regs} (no engine needed: {@link Kprobes#liveRegs}). */
    public static GuestTasks of(Machine machine, dev.kpemu.kprobes.Regs regs, KernelStructs structs) {
        TaskLayout layout = null;
        long parent = -1, pid = -1;
        if (structs != null) {
            try {
                layout = TaskLayout.of(structs);
                pid = structs.pidOffset();
                parent = structs.task("real_parent").offset();
            } catch (RuntimeException e) {
                layout = null;
            }
        }
        GuestTasks t = new GuestTasks(machine, new MachineFetchContext(machine, regs, KernelSymbols.permissive(), layout), parent, pid);
        if (structs != null) {
            try {
                t.binprmP = structs.btf().offsetOf("linux_binprm", "p").offset();
                t.binprmArgc = structs.btf().offsetOf("linux_binprm", "argc").offset();
            } catch (RuntimeException e) {
                t.binprmP = t.binprmArgc = -1;
            }
        }
        return t;
    }

    /**
     * At the entry of a function whose first argument is the {@code struct linux_binprm *} of an
     * exec past the point of no return ({@code setup_new_exec}): the new program's argv, read from
     * the new stack where {@code copy_strings} put it ({@code bprm->p} is argv[0], the strings follow
     * one another); null when it cannot be read.
     */
    public java.util.List<String> execArgv(Regs r, int maxArgs) {
        if (binprmP < 0) return null;
        fetch.begin(r);
        long bprm = r.arg(0);
        byte[] b = new byte[8];
        if (!fetch.readKernel(bprm + binprmP, b, 0, 8)) return null;
        long p = 0;
        for (int i = 7; i >= 0; i--) p = (p << 8) | (b[i] & 0xff);
        if (!fetch.readKernel(bprm + binprmArgc, b, 0, 4)) return null;
        int argc = (b[0] & 0xff) | (b[1] & 0xff) << 8 | (b[2] & 0xff) << 16 | (b[3] & 0xff) << 24;
        if (argc < 0 || argc > maxArgs) return null;
        java.util.List<String> argv = new java.util.ArrayList<>();
        byte[] buf = new byte[4096];
        for (int i = 0; i < argc; i++) {
            int n = fetch.readUserString(p, buf, 0, buf.length);
            if (n < 0) return null;
            int len = 0;
            while (len < n && buf[len] != 0) len++;
            argv.add(GuestText.decode(java.util.Arrays.copyOf(buf, len)));
            p += len + 1;
        }
        return argv;
    }

    /** As {@link #of(Machine, Kprobes, KernelStructs)} with the structures read from {@code guest} (none when it has no BTF). */
    public static GuestTasks of(dev.kpemu.boot.LinuxGuest guest, Kprobes kprobes) {
        KernelStructs s;
        try {
            s = guest.kernelStructs();
        } catch (KernelImageException | RuntimeException e) {
            s = null;
        }
        return of(guest.machine(), kprobes, s);
    }

    @Override public String comm(Regs r) {
        fetch.begin(r);
        return GuestText.decode(fetch.comm());
    }

    @Override public int pid(Regs r) {
        fetch.begin(r);
        return fetch.pid();
    }

    @Override public boolean descendsFrom(Regs r, int ancestor) {
        fetch.begin(r);
        long t = fetch.currentTask();
        if (t == 0 || realParentOffset < 0) return false;
        byte[] b = new byte[8];
        for (int depth = 0; depth < MAX_DEPTH && t != 0; depth++) {
            if (!fetch.readKernel(t + pidOffset, b, 0, 4)) return false;
            int pid = (b[0] & 0xff) | (b[1] & 0xff) << 8 | (b[2] & 0xff) << 16 | (b[3] & 0xff) << 24;
            if (pid == ancestor) return true;
            if (pid <= 1) return false;          // init and the idle task: the top of every tree
            if (!fetch.readKernel(t + realParentOffset, b, 0, 8)) return false;
            long next = 0;
            for (int i = 7; i >= 0; i--) next = (next << 8) | (b[i] & 0xff);
            if (next == t) return false;
            t = next;
        }
        return false;
    }

    /** The pid of the current task's {@code real_parent}, or -1 when it cannot be read. */
    public int parentPid(Regs r) {
        fetch.begin(r);
        long t = fetch.currentTask();
        byte[] b = new byte[8];
        if (t == 0 || realParentOffset < 0 || !fetch.readKernel(t + realParentOffset, b, 0, 8)) return -1;
        long parent = 0;
        for (int i = 7; i >= 0; i--) parent = (parent << 8) | (b[i] & 0xff);
        if (parent == 0 || !fetch.readKernel(parent + pidOffset, b, 0, 4)) return -1;
        return (b[0] & 0xff) | (b[1] & 0xff) << 8 | (b[2] & 0xff) << 16 | (b[3] & 0xff) << 24;
    }

    /**
     * The context columns of a trace line made now by the current task (hit registers {@code r}):
     * comm-pid, cpu, the latency column with only irqs-off ({@code d} or {@code .}), the guest time.
     */
    public TraceContext traceContext(Regs r) {
        fetch.begin(r);
        int pid = fetch.pid();
        String comm = fetch.currentTask() == 0 ? "<...>" : pid == 0 ? "<idle>" : GuestText.decode(fetch.comm());
        String lat = TraceContext.latency(fetch.irqsDisabled(), false, false, false, false, false, false, 0, 0);
        return new TraceContext(comm, pid, machine.cpu(), lat, machine.clock().liveNanos());
    }
}
