/**
 * Jump optimization of kprobes (Linux's optprobes): analysis, code generation and the optimizer the kprobes engine runs.
 *
 * <ol>
 * <li>{@link dev.kpemu.optprobes.OptimizationSafety#check} takes a {@link dev.kpemu.optprobes.Candidate}
 *     (the containing function's original bytes, the probe, the other probes, the probe's state, the
 *     exception table, ftrace and self-patched sites) and returns a {@link dev.kpemu.optprobes.Verdict}:
 *     the {@link dev.kpemu.optprobes.DisplacedRegion} or every {@link dev.kpemu.optprobes.Refusal}; the
 *     rules are the arch's ({@link dev.kpemu.optprobes.ArchOptimizer}: {@code X86OptimizationRules},
 *     {@code Arm64OptimizationRules}; nothing generic branches on the arch).</li>
 * <li>{@link dev.kpemu.optprobes.DetourBuffer#build} turns a region into the bytes of a detour at a
 *     buffer address (x86 within ±2 GiB, arm64 within ±128 MiB of the probe), with the address of
 *     the host hand-off, the displaced code and the return point.</li>
 * <li>{@link dev.kpemu.optprobes.SitePatch#of} gives the bytes for the probe site: original,
 *     jump, and breakpoint (unoptimized).</li>
 * <li>{@link dev.kpemu.optprobes.JumpOptimizer} is the kprobes engine's {@code ProbeOptimizer}: it
 *     applies the three steps above to registered probes, writes jumps at safe points and puts the
 *     breakpoints back when a probe stops being optimizable; {@link dev.kpemu.optprobes.OptimizationInputs}
 *     gives it the kernel tables the rules need (empty for bare-metal guests).</li>
 * </ol>
 * Steps 1–3 never touch a running guest; the optimizer does, only through the engine's view and
 * at the points the engine allows.
 *
 * <p>jump optimization's analysis and code, per arch behind <code>ArchOptimizer</code> (<code>X86Optimizer</code>, <code>Arm64Optimizer</code>: rules, detour code, site patch, detour reach, user mode, the kernel tables to read; the generic classes never branch on the arch): <code>OptimizationSafety</code> (the rules' documentation and shared checks; <code>X86OptimizationRules</code>: Linux's <code>can_optimize</code> rules on x86; <code>Arm64OptimizationRules</code>: kpemu's one-instruction rules on arm64), <code>DetourBuffer</code> (two styles: <code>LIVE_REGISTERS</code>, what <code>JumpOptimizer</code> builds — the host hand-off is the detour's first instruction and the handlers see the live registers — then the relocated displaced code and the jump back; <code>FRAME</code>, as Linux's detour: a pt_regs frame saved, the hand-off, the frame restored), <code>SitePatch</code> (jump / breakpoint / original bytes), <code>JumpOptimizer</code> (the engine's <code>ProbeOptimizer</code>: queue, delay, jump written at safe points, unoptimize/re-optimize; a probe on a listed ftrace site is refused without decoding its function, as Linux never optimizes a <code>kprobe_ftrace</code> probe), <code>OptimizationInputs</code> (kernel tables the rules need; empty for bare metal), <code>KernelOptimizationInputs</code> (those tables read from a booted kernel's file by the arch's reader, <code>ArchOptimizer.kernelInputs</code>: <code>X86KernelInputsReader</code> — <code>__ex_table</code>, <code>__mcount_loc</code>, jump labels, static calls, retpoline thunks; <code>Arm64KernelInputsReader</code> — ftrace sites from the code, and each candidate function's possible jump-label sites, its <code>nop</code>s and <code>b</code>s; <code>forRelease</code> sets the booted release's rules: x86 <code>can_boost</code> takes the opcode-group ALU forms from 6.9)
 */
package dev.kpemu.optprobes;
