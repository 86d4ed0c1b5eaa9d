/**
 * Jump optimization of kprobes (Linux's optprobes), the analysis and code-generation half.
 *
 * <ol>
 * <li>{@link dev.kpemu.optprobes.OptimizationSafety#check} takes a {@link dev.kpemu.optprobes.Candidate}
 *     (the containing function's original bytes, the probe, the other probes, the probe's state, the
 *     exception table, ftrace and self-patched sites) and returns a {@link dev.kpemu.optprobes.Verdict}:
 *     the {@link dev.kpemu.optprobes.DisplacedRegion} or every {@link dev.kpemu.optprobes.Refusal}.</li>
 * <li>{@link dev.kpemu.optprobes.DetourBuffer#build} turns a region into the bytes of a detour at a
 *     buffer address (x86 within ±2 GiB, arm64 within ±128 MiB of the probe), with the address of
 *     the host hand-off, the displaced code and the return point.</li>
 * <li>{@link dev.kpemu.optprobes.SitePatch#of} gives the bytes for the probe site: original,
 *     jump, and breakpoint (unoptimized).</li>
 * </ol>
 * Nothing here touches a running guest: the kprobes engine owns the text, the buffers, the hooks
 * and the moment patches are written.
 */
package dev.kpemu.optprobes;
