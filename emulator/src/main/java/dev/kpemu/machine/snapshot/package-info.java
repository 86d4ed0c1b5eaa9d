/**
 * Module <code>emulator</code>, package <code>dev.kpemu.machine.snapshot</code>.
 *
 * <p><code>MachineSnapshot</code>: the whole machine saved at a safe point and restored into a fresh one (<code>CpuContext</code>: Unicorn's saved CPU state, engine-specific words calibrated; <code>MemoryImage</code>: non-zero RAM pages; zstd with a checksum; an identity a restore must match; <code>SnapshotException</code> by kind: corrupt, other machine, I/O), with N vCPUs every engine's context, their run states, the current vCPU, the quantum left and the schedule's position (format 2, the CPU count in the header; one vCPU writes format 1 as before; a restore into another CPU count is refused in one line; smp-notes step 7)
 *
 * <p><b>Snapshots in a boot.</b>
 * <b>Snapshots</b> ({@code kpemu boot --snapshot}, {@code --snapshot-file FILE}; {@code
 * BootRunner.boot(options, hooks, BootSnapshot)}). A cold boot stops at a host breakpoint on
 * {@code run_init_process} (after the kernel's boot-time text patching, before any probe is
 * attached) and saves the machine there ({@code MachineSnapshot}): the CPU ({@code
 * uc_context_save}'s state: QEMU's {@code CPUX86State} to {@code end_reset_fields} / {@code
 * CPUARMState} to {@code cpu_watchpoint}, i.e. general, segment and descriptor registers with
 * their hidden parts, control registers, MSRs, system registers, x87/SSE and FP/SIMD, the cached
 * translation flags; the context header and any word that differs between two fresh engines, found
 * by calibration, stay the restoring engine's), the machine's own state (the clock's instructions,
 * idle time and event order; the breakpoint stop; the arch's latches and counters), every
 * registered {@code Stateful} part in order, each a length-checked section (devices write their
 * pending clock events as due time + order, {@code VirtualClock.writeEvent}/{@code readEvent}, so
 * timers fire in the same order), and the RAM's non-zero pages, in one zstd frame with a content
 * checksum, after an identity (arch, kernel and initramfs sha256, command line, memory, command
 * terminal, the snapshot point, the kpemu build's digest, the Unicorn version). A restore builds
 * the same guest as a cold boot (kernel loaded, devices wired), then overwrites it: parts, memory
 * (the saved pages written, every other page the host wrote before the guest ran zeroed by handing
 * it back to the host, {@code GuestMemory.zeroUnrunPages} → {@code madvise(MADV_DONTNEED)}: {@code
 * GuestMemory} tracks them; a machine whose guest has run is compared page by page instead), CPU
 * last; {@code BootRunner} then hands the hooks the stop at {@code run_init_process} as the cold
 * boot's loop would, so {@code TracedBoot} (which {@code --snapshot} runs with {@code
 * --from-init}) registers the probes there. Both the saving and the restored machine drop the TLB
 * and translated code at the snapshot point: the TLB is a cache the guest can see (a stale entry
 * is one fault more or less; measured on arm64 before this: 22,855 instructions fewer after a
 * restore), and so does {@code TracedBoot} when it registers probes there without a snapshot
 * ({@code --from-init}). A cold {@code --from-init} boot, the saving boot and the restored boot
 * then print the same trace and console and execute the same instructions to power-off on both
 * arches ({@code SnapshotBootTest}; with 2 and 4 CPUs, seeded schedules too, {@code
 * SmpSnapshotBootTest}). The automatic cache lives in {@code .cache/snapshots}, one file per
 * identity; a cached file that cannot be restored is reported in one line and the boot is cold
 * (and saves a new one; saving also deletes the cache's snapshots of other kpemu builds); {@code
 * --snapshot-file} refuses it (exit 6). Snapshots are refused while probes are attached (the
 * kprobes engine's host state is not in them) and with terminal input ({@code -i}, {@code
 * --input}). {@code BootSnapshot.atGuestTime(t)} (the API's {@code snapshotAt}) takes the snapshot
 * at a guest time instead: an event on the guest clock ends the run there (idling cannot jump past
 * it), the loop saves between slices (a machine with probes attached is refused in a notice, no
 * file), the identity's point names the time, and a restore continues from there, handing the
 * hooks a saved host-breakpoint stop as the saving boot's loop did.
 */
package dev.kpemu.machine.snapshot;
