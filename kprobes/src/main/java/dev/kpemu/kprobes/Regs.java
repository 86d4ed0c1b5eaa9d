package dev.kpemu.kprobes;

import java.util.List;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.PageTableWalker;

/**
 * The trapped CPU's registers as a handler sees them (the kernel's {@code struct pt_regs}),
 * read and written straight through to the vCPU. x86-64 names: {@code rax … r15, rip, rflags,
 * cs, ss, …}; arm64: {@code x0 … x30, lr, sp, pc, pstate}.
 */
public interface Regs {
    Arch arch();

    /** Instruction pointer ({@code instruction_pointer(regs)}). x86 pre handlers see the probe address + 1, as in Linux. */
    long ip();

    void setIp(long ip);

    long sp();

    void setSp(long sp);

    /** {@code regs_return_value}: x86 rax, arm64 x0. */
    long returnValue();

    void setReturnValue(long value);

    /**
     * The {@code n}-th (0-based) argument of the probed function at its entry, by the arch's
     * calling convention ({@code regs_get_kernel_argument}): x86 rdi, rsi, rdx, rcx, r8, r9 then
     * the stack; arm64 x0–x7, 0 beyond.
     */
    long arg(int n);

    void setArg(int n, long value);

    /** A register by name; IllegalArgumentException for unknown names. */
    long get(String name);

    void set(String name, long value);
    /**
     * The registers {@code names} (as {@link #get} knows them) into {@code out}, read at once: the
     * vCPU's own views make one engine call for all of them, where each {@link #get} is a call of
     * its own (a hit's handler reads several). Callers pass the same array each time.
     */
    default void getAll(String[] names, long[] out) {
        for (int i = 0; i < names.length; i++) out[i] = get(names[i]);
    }

    /** Every register name {@link #get} knows. */
    List<String> names();

    /** The name {@link #get} and {@link #set} know the instruction pointer by (x86 {@code rip}, arm64 {@code pc}). */
    String ipName();

    /** The name {@link #get} and {@link #set} know the stack pointer by (x86 {@code rsp}, arm64 {@code sp}). */
    String spName();

    /** Reads 8 bytes of guest-virtual memory through the current page tables. */
    long readLong(long va);

    /**
     * The page tables the trapped CPU translates with (x86 CR0, CR4, CR3; arm64 SCTLR_EL1,
     * TCR_EL1, TTBR0/1_EL1): during a hit, made once from registers the hit reads in one batch.
     */
    PageTableWalker pageTables();

    /**
     * x86-64 {@code pt_regs.orig_ax} as the handler's frame holds it: -1 in an exception frame
     * (the {@code int3} of a breakpoint probe; Linux's optprobe callback sets it to -1 too), 0 in
     * the frame ftrace's trampoline builds for a kprobe on an ftrace site ({@link FtraceRegs}).
     */
    default long origAx() { return -1; }

    /**
     * How the handler was entered, the path Linux's handler would have come by: a breakpoint
     * ({@code int3} / {@code BRK} exception), ftrace's call from an ftrace site
     * ({@code kprobe_ftrace_handler}), or an optimized probe's jump ({@code optimized_callback}).
     * The latency column of a trace line depends on it (interrupt state, preempt and irq counts
     * the path adds).
     */
    default Entry entry() { return Entry.BREAKPOINT; }

    /** The ways a probe's handler is entered ({@link #entry()}). */
    enum Entry { BREAKPOINT, FTRACE, JUMP }
}
