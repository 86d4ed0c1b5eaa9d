/**
 * Module <code>emulator</code>, package <code>dev.kpemu.machine.snapshot</code>.
 *
 * <p><code>MachineSnapshot</code>: the whole machine saved at a safe point and restored into a fresh one (<code>CpuContext</code>: Unicorn's saved CPU state, engine-specific words calibrated; <code>MemoryImage</code>: non-zero RAM pages; zstd with a checksum; an identity a restore must match; <code>SnapshotException</code> by kind: corrupt, other machine, I/O), with N vCPUs every engine's context, their run states, the current vCPU, the quantum left and the schedule's position (format 2, the CPU count in the header; one vCPU writes format 1 as before; a restore into another CPU count is refused in one line; smp-notes step 7)
 */
package dev.kpemu.machine.snapshot;
