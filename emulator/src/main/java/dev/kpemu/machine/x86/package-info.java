/**
 * Module <code>emulator</code>, package <code>dev.kpemu.machine.x86</code>.
 *
 * <p>(Shared with <code>dev.kpemu.machine.arm64</code>.) the per-arch backends: exception and interrupt entry done by the host, page-table walkers, the host's own page-table edits (<code>X86PageMapper</code>, <code>Arm64PageMapper</code>: <code>Machine.mapKernelPages</code>, the kprobes slot area), long-mode setup, PSCI (with a <code>CpuControl</code>, CPU_ON/CPU_OFF/AFFINITY_INFO for 1-8 PEs; <code>Arm64Board</code> of N &gt; 1 PEs carries them out on <code>Machine.startCpu</code>/<code>stopCpu</code>); system-call entry in native code (<code>NativeSyscall</code>, <code>NativeSvc</code>; <code>NativeHookFunctions</code> finds each of kpemu's C hooks and checks its state struct's size against the Java side)
 */
package dev.kpemu.machine.x86;
