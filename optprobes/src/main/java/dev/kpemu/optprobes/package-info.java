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
 */
package dev.kpemu.optprobes;
