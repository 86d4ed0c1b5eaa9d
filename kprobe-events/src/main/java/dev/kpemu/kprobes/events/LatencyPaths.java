package dev.kpemu.kprobes.events;

import dev.kpemu.machine.Arch;

/**
 * What each way Linux fires a probe event adds to the probed code's state before the record is
 * made ({@link LatencyFlags#traceContext}), per architecture and kernel build. A preempt_disable
 * counts only with CONFIG_PREEMPT_COUNT, which Debian's kernels have exactly when they have
 * CONFIG_PREEMPTION ({@link Kernel#preemption}: x86-64 6.1, 6.12, 7.2 and arm64 7.2; not arm64
 * 6.1 and 6.12, whose preempt depth is always 0 and whose word is not decremented).
 *
 * <ul>
 * <li>{@link Path#BREAKPOINT}: x86-64 {@code exc_int3} from kernel mode runs
 *     {@code irqentry_nmi_enter} ({@code __nmi_enter}: preempt_count += NMI_OFFSET +
 *     HARDIRQ_OFFSET) with interrupts off (an interrupt gate); {@code kprobe_int3_handler} adds
 *     no preempt count. arm64 {@code el1_brk64} / {@code el1_dbg} run with DAIF masked by the
 *     exception and {@code debug_exception_enter}'s preempt_disable.</li>
 * <li>{@link Path#FTRACE} (x86-64 {@code [FTRACE]} kprobes): {@code kprobe_ftrace_handler}'s
 *     {@code ftrace_test_recursion_trylock} (one preempt_disable), interrupts as the caller had
 *     them; with more than one ftrace_ops on the function ftrace calls through
 *     {@code ftrace_ops_list_func}, whose own trylock adds one more.</li>
 * <li>{@link Path#JUMP} (x86-64 optimized probes): {@code optimized_callback}'s preempt_disable,
 *     interrupts as the probed code had them. arm64 has no optprobes in Linux: kpemu's detour
 *     stands for the {@code BRK} path there.</li>
 * <li>{@link Path#KRETPROBE_RETURN}: x86-64 {@code arch_rethook_trampoline} →
 *     {@code rethook_trampoline_handler} (preempt_disable_notrace), interrupts as returned with;
 *     arm64 6.12 and later: {@code __kretprobe_trampoline} is a {@code BRK} (interrupts masked,
 *     {@code debug_exception_enter}) and {@code kretprobe_trampoline_handler}'s
 *     {@code kprobe_busy_begin} (preempt_disable); arm64 6.1: a register-saving trampoline calling
 *     {@code kretprobe_trampoline_handler} (only {@code kprobe_busy_begin}).</li>
 * <li>{@link Path#FPROBE_ENTRY}: 6.12's {@code fprobe_handler} (an ftrace_ops per fprobe; one
 *     trylock); 7.x's fgraph-based fprobes ({@code fprobe_ftrace_entry}, an ftrace_ops without
 *     FTRACE_OPS_FL_RECURSION: {@code ftrace_ops_assist_func}'s trylock and the handler's): two;
 *     one more through {@code ftrace_ops_list_func} when the function has several ftrace_ops.
 *     Recorded: {@code vfs_readlink+0x4} alone prints depth 0 on 6.12 and 1 on 7.2;
 *     {@code vfs_read+0x4} with three fprobes 1 and 2.</li>
 * <li>{@link Path#FPROBE_EXIT}: 6.12 {@code rethook_trampoline_handler} and
 *     {@code fprobe_exit_handler}'s trylock; 7.x the fgraph return path: two (recorded: depth 1
 *     on 6.12 and 7.2, both arches).</li>
 * <li>{@link Path#TRACEPOINT}: the event's fprobe sits on the tracepoint's probestub, which the
 *     guest's own tracepoint code calls (with 6.12's {@code __DO_TRACE} preempt_disable_notrace
 *     already counted in the guest's state; 7.x's tracepoints no longer disable preemption): the
 *     path adds what an fprobe entry with one ftrace_ops adds (recorded: depth 1 on 6.12 and 7.2,
 *     both arches).</li>
 * <li>{@link Path#WATCHPOINT} (wprobe events, linux-next only: nothing recorded): x86-64's
 *     {@code exc_debug_kernel} enters as an NMI ({@code irqentry_nmi_enter}: NMI_OFFSET +
 *     HARDIRQ_OFFSET, interrupts off) and the perf overflow path adds one preempt_disable, as
 *     wprobetrace.rst's example line prints ({@code d.Z1.}); arm64's watchpoint exception
 *     ({@code el1_dbg}) as its {@code BRK}: interrupts masked, {@code debug_exception_enter}'s
 *     preempt_disable (by analogy, not recorded).</li>
 * </ul>
 */
public final class LatencyPaths {
    /** The way a probe event was fired. */
    public enum Path { BREAKPOINT, FTRACE, JUMP, KRETPROBE_RETURN, FPROBE_ENTRY, FPROBE_EXIT, TRACEPOINT, WATCHPOINT }

    /**
     * What a kernel build does on those paths, from its kallsyms and text.
     *
     * @param arch                the architecture
     * @param preemption          CONFIG_PREEMPTION (and so CONFIG_PREEMPT_COUNT): kallsyms has {@code preempt_schedule}
     * @param fprobeOnFgraph      fprobes built on fgraph (6.14 and later): kallsyms has {@code fprobe_fgraph_entry}
     * @param kretprobeBreakpoint arm64: {@code __kretprobe_trampoline} is a {@code BRK} (kallsyms has {@code kretprobe_brk_handler})
     */
    public record Kernel(Arch arch, boolean preemption, boolean fprobeOnFgraph, boolean kretprobeBreakpoint) {}

    private LatencyPaths() {}

    /**
     * The state {@code tracing_gen_ctx} reads when the event is recorded: the probed code's
     * state {@code guest} plus what {@code path} added.
     *
     * @param ftraceOps how many ftrace_ops are attached to the function's ftrace site (for
     *                  {@link Path#FTRACE} and {@link Path#FPROBE_ENTRY}; 1 or less: a direct call)
     */
    public static LatencyFlags.State atRecord(Kernel k, Path path, LatencyFlags.State guest, int ftraceOps) {
        boolean x86 = k.arch() == Arch.X86_64;
        boolean irqsOff = guest.irqsOff();
        int irqCounts = 0, disables;
        int listFunc = ftraceOps > 1 ? 1 : 0;
        switch (path) {
            case BREAKPOINT -> {
                irqsOff = true;
                if (x86) {
                    irqCounts = LatencyFlags.NMI_OFFSET + LatencyFlags.HARDIRQ_OFFSET;
                    disables = 0;
                } else {
                    disables = 1;
                }
            }
            case WATCHPOINT -> {
                irqsOff = true;
                if (x86) irqCounts = LatencyFlags.NMI_OFFSET + LatencyFlags.HARDIRQ_OFFSET;
                disables = 1;
            }
            case JUMP -> {
                if (x86) {
                    disables = 1;
                } else {
                    irqsOff = true;
                    disables = 1;
                }
            }
            case FTRACE -> disables = 1 + listFunc;
            case KRETPROBE_RETURN -> {
                if (x86) {
                    disables = 1;
                } else if (k.kretprobeBreakpoint()) {
                    irqsOff = true;
                    disables = 2;
                } else {
                    disables = 1;
                }
            }
            case FPROBE_ENTRY -> disables = (k.fprobeOnFgraph() ? 2 : 1) + listFunc;
            case TRACEPOINT -> disables = k.fprobeOnFgraph() ? 2 : 1;
            case FPROBE_EXIT -> disables = 2;
            default -> throw new IllegalArgumentException(String.valueOf(path));
        }
        int pc = guest.preemptCount() + irqCounts + (k.preemption() ? disables : 0);
        return new LatencyFlags.State(irqsOff, pc, guest.needResched(), guest.needReschedLazy(),
                guest.preemptNeedResched(), guest.migrationDisabled());
    }

    /** The trace context word of an event fired by {@code path} on {@code guest}. */
    public static int traceContext(Kernel k, Path path, LatencyFlags.State guest, int ftraceOps) {
        return LatencyFlags.traceContext(atRecord(k, path, guest, ftraceOps), k.preemption());
    }
}
