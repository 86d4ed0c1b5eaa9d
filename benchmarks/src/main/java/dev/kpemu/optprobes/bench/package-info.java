/**
 * Module <code>benchmarks</code>, package <code>dev.kpemu.optprobes.bench</code>.
 *
 * <p>(Shared with <code>dev.kpemu.bench</code>, <code>dev.kpemu.kprobes.bench</code>.) the engines' micro-benchmarks, kept out of the engine jars (packages unchanged): <code>UnicornBench</code> (<code>kpemu bench unicorn</code>: trap round trip, register read, step, stop/restart), <code>ProbeBench</code> (<code>kpemu bench probes</code>: per-hit cost of stepped, boosted kprobes and kretprobes on a bare-metal guest), <code>OptimizedProbeBench</code> (the same with the jump optimizer); the CLI depends on it, nothing else does. The CLI's own <code>BootBench</code> and <code>SnapshotBench</code> stay in <code>cli</code>: they are commands over a booted kernel
 */
package dev.kpemu.optprobes.bench;
