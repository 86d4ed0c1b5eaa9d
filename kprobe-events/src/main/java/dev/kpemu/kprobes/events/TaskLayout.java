package dev.kpemu.kprobes.events;

import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.machine.Arch;

import java.util.Objects;

/**
 * Where the guest kernel keeps the current task and the {@code task_struct} members a trace
 * needs ({@code comm}, {@code pid}, {@code tgid}): for a booted Debian kernel from its BTF
 * ({@link #of(KernelStructs)}), for bare-metal tests from a layout the test writes into guest
 * memory itself ({@link #x86} / {@link #arm64}).
 *
 * <ul>
 * <li>x86-64: {@code current} is the 8 bytes at {@code GS_BASE + gsOffset} (the per-CPU
 *     {@code current_task} or {@code pcpu_hot.current_task}); in kernel mode GS_BASE is the
 *     kernel's per-CPU base (MSR 0xc0000101).
 *     A uniprocessor kernel keeps it in an ordinary global: {@code gsRelative} false, the
 *     pointer at the absolute address {@code gsOffset}.</li>
 * <li>arm64: {@code current} is SP_EL0 while the CPU is in the kernel.</li>
 * </ul>
 *
 * @param arch       the guest's architecture
 * @param gsOffset   x86-64: offset from GS_BASE of the task pointer; arm64: unused (0)
 * @param commOffset {@code offsetof(struct task_struct, comm)} (16 bytes, TASK_COMM_LEN)
 * @param pidOffset  {@code offsetof(struct task_struct, pid)} (a 4-byte pid_t)
 * @param tgidOffset {@code offsetof(struct task_struct, tgid)}
 * @param gsRelative x86-64: whether {@code gsOffset} is added to GS_BASE (false: a uniprocessor kernel's absolute address)
 */
public record TaskLayout(Arch arch, long gsOffset, long commOffset, long pidOffset, long tgidOffset, boolean gsRelative) {
    /** TASK_COMM_LEN. */
    public static final int COMM_LEN = 16;

    public TaskLayout {
        Objects.requireNonNull(arch);
    }

    /** From the kernel's BTF (and kallsyms for x86-64's per-CPU offset). */
    public static TaskLayout of(KernelStructs k) {
        // a fact about the data: only x86-64's kernel keeps current in a per-CPU variable (arm64: SP_EL0)
        long gs = k.arch() == Arch.X86_64 ? k.currentTask().gsOffset() : 0;
        return new TaskLayout(k.arch(), gs, k.commOffset(), k.pidOffset(), k.tgidOffset(),
                k.arch() == Arch.X86_64 && k.currentTask().gsRelative());
    }

    /** An x86-64 layout: current at {@code GS_BASE + gsOffset}. */
    public static TaskLayout x86(long gsOffset, long commOffset, long pidOffset, long tgidOffset) {
        return new TaskLayout(Arch.X86_64, gsOffset, commOffset, pidOffset, tgidOffset, true);
    }

    /** An arm64 layout: current in SP_EL0. */
    public static TaskLayout arm64(long commOffset, long pidOffset, long tgidOffset) {
        return new TaskLayout(Arch.ARM64, 0, commOffset, pidOffset, tgidOffset, false);
    }
}
