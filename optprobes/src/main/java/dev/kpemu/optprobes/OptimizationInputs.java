package dev.kpemu.optprobes;

import dev.kpemu.machine.Machine;
import java.util.List;
import java.util.Set;

/**
 * What the {@link JumpOptimizer} needs to know about the guest kernel besides its text and
 * symbols: the tables {@link OptimizationSafety} checks against, and when a jump may be written.
 * Every method has an empty default, which is right for the bare-metal guests of the tests.
 * For a real kernel these come from the image: {@code __ex_table} (fault addresses),
 * {@code __mcount_loc} / {@code __patchable_function_entries} (ftrace sites), the alternatives,
 * jump-label and static-call sites ({@code reservedText}), {@code __indirect_thunk_start..end}
 * on retpoline kernels, BTI on arm64: {@link KernelOptimizationInputs} reads them from a kernel.
 */
public interface OptimizationInputs {

    /** Bare metal: no tables, the patch window always open. */
    OptimizationInputs NONE = new OptimizationInputs() {};

    /** Faulting-instruction addresses of the kernel's exception table. */
    default Set<Long> exceptionTable() { return Set.of(); }

    /** ftrace call sites. */
    default Set<Long> ftraceSites() { return Set.of(); }

    /** Other text the guest patches at run time (alternatives, jump labels, static calls). */
    default List<TextRange> reservedText() { return List.of(); }

    /**
     * The reserved text that overlaps {@code function} (the optimizer asks per candidate). Default:
     * {@link #reservedText()} filtered; an implementation may derive ranges from the function's code.
     */
    default List<TextRange> reservedText(TextRange function) {
        return reservedText().stream().filter(r -> r.overlaps(function)).toList();
    }

    /** x86: refuse functions with indirect jumps (see {@link Candidate#indirectJumpCheck()}). */
    default boolean indirectJumpCheck() { return true; }

    /** x86: the retpoline thunk range, or null. */
    default TextRange indirectThunks() { return null; }

    /** x86: recognise the entry ftrace site by its bytes (see {@link Candidate#detectEntryFtraceSite()}). */
    default boolean detectEntryFtraceSite() { return true; }

    /** arm64: BTI is enforced. */
    default boolean landingPadsEnforced() { return false; }

    /** x86: the kernel boosts the ALU forms of opcode groups 2&ndash;5 (see {@link Candidate#groupFormsBoostable()}). */
    default boolean groupFormsBoostable() { return false; }

    /**
     * True when no <em>interrupted</em> guest context can have its pc inside kernel text that is
     * about to be patched (the optimizer separately checks every vCPU's own pc against the displaced
     * region). Bare metal without interrupts: always. For a kernel use {@link #kernelPatchWindow}.
     */
    default boolean patchWindowOpen(Machine machine) { return true; }

    /**
     * The window for a kernel built without full preemption (Linux's own optprobe condition,
     * {@code CONFIG_PREEMPT=n}), on every vCPU that holds a context: it runs user code (x86 CPL 3,
     * arm64 EL0), so its current task has no interrupted kernel context, and tasks asleep in the
     * kernel sleep at call sites (a return address is never inside a displaced region: a region
     * holds no call), or its pc is in one of {@code idleText} (the idle loop after an idle exit,
     * e.g. {@code default_idle}, {@code cpu_do_idle}) or is one of {@code alsoAt}.
     */
    static boolean kernelPatchWindow(Machine machine, List<TextRange> idleText, List<Long> alsoAt) {
        ArchOptimizer arch = ArchOptimizer.of(machine.arch());
        return Vcpus.every(machine, arch, (pc, user) -> {
            if (user || alsoAt.contains(pc)) return true;
            for (TextRange r : idleText) if (r.contains(pc)) return true;
            return false;
        });
    }

    /** {@link #kernelPatchWindow(Machine, List, List)} with no extra addresses. */
    static boolean kernelPatchWindow(Machine machine, List<TextRange> idleText) {
        return kernelPatchWindow(machine, idleText, List.of());
    }
}
