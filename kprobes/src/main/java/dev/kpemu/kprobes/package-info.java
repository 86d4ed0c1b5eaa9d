/**
 * Module <code>kprobes</code>, package <code>dev.kpemu.kprobes</code>.
 *
 * <p>the generic engine behind the façade <code>Kprobes</code> (its public methods; each concern in a package-private class: <code>ProbeRegistration</code> — register/unregister with the kernel's errno values, aggregation, enable/disable, <code>kill_kprobe</code>, blacklist; <code>ProbeTable</code> — the probe points; <code>ProbeArming</code> — breakpoints, boosting, the global switch, original text and text coherence; <code>HitPath</code> — hits, steps, reentry and <code>nmissed</code>, faults, optimized hits; <code>RecordedHits</code> — hits the machine's native code records at the breakpoint (armed, boosted points of the kind the arch records, <code>ArchKprobes.recordedEntry</code>: x86-64 ftrace sites, arm64 breakpoints, whose every enabled probe has a <code>RecordedHitHandler</code> that says it is recordable: registers, the words the event engine names and the kernel memory a site's only enabled handler plans (<code>RecordedHitHandler.memoryReads</code>: a kprobe event's fields and dereferences, read at the hit, the hit left to Java when a read fails), read back in order as <code>RecordedHit</code>s before any other hook runs; off at every change until the next safe point, while a hit is in flight on the vCPU; each vCPU records into its own ring, read back before another vCPU runs; a point whose only enabled probe's handler gives a line format gets its trace line written by the native code too, <code>RecordedHitHandler.lineFormat</code>/<code>onRecordedLine</code>); <code>AddressIndex</code> — the hit's lookups by address without boxing; <code>Activations</code> — <code>current_kprobe</code>, one per vCPU (<code>Machine.cpu()</code>: a hit while another vCPU is mid-step is an ordinary hit); <code>ReturnProbes</code> — kretprobe instances through the kernel's own trampoline (one pool shared by the vCPUs, Linux's default <code>maxactive</code> max(10, 2 × CPUs)), task flush, stack traces; <code>OptimizerBridge</code> + <code>OptimizerView</code> — jump optimization's side; <code>ProbeListing</code> — <code>list()</code> with <code>[FTRACE]</code>; <code>HandlerFailures</code>), one probe type <code>Probe</code> (<code>Kprobe</code>, <code>Kretprobe</code>), <code>AddressRules</code> / <code>KernelProbeRules</code> (Linux's <code>check_kprobe_address_safe</code>, <code>check_ftrace_location</code> and trace_kprobe's notrace rule from the kernel's <code>KernelTextTables</code>; <code>RangeIndex</code> finds an address's blacklist, jump-label or static-call entry by binary search), <code>ProbeDecoder</code> (the arch's registration-time decisions on text alone), <code>RegisterBatches</code> (<code>Regs.getAll</code> for both arches: one engine batch per caller's list of names and vCPU), <code>LiveRegs</code> (the arch <code>Regs</code>' common part, the current vCPU's: from a hit's first register read to the end of its handlers the registers come from one engine batch — a core set (flags, the current task's register, the page-table registers, so <code>Regs.pageTables()</code> walks without an engine call) and every register hits have read besides — written through, read again when <code>Unicorn.stateChanges()</code> moved), <code>SlotArea</code> (out-of-line slots in guest memory), <code>TextWatch</code> (text coherence, on the machine's <code>TextGuard</code>)
 *
 * <p><b>The engine in short.</b>
 * {@code Kprobes.attach(machine, symbols, slotArea)} makes the engine the machine's {@code
 * TrapHandler}; the details are in {@code kprobes/README.md}. In short:
 * <ul><li>
 * <b>Registration</b> checks in the kernel's order and decodes the probed instruction once into an
 * {@code ArchInsn} ("copy to a slot, fixed up" or "simulate this branch"); the hit path only
 * executes that decision.
 * </li><li>
 * <b>Arming</b> writes {@code int3} / {@code BRK #4} through the guest's page tables (the host
 * ignores page permissions) and drops Unicorn's translated code for the range; the original bytes
 * are kept and written back byte for byte on disarm/unregister.
 * </li><li>
 * <b>A hit</b> runs the pre handlers (newest first), then the instruction — from a slot in guest
 * RAM that the kernel's memory map never includes, mapped in the kernel half of the address space
 * (x86: just below kernel text, so rel32 fix-ups reach), followed by a trap ({@code int3} / {@code
 * BRK #6}) or, when boosted, by a jump back — or simulated in Java for branches and PC-relative
 * instructions; then the post handlers. External interrupts are held from the hit to the end of
 * the step. A fault in the stepped copy reaches the guest at the probed address. A probe on an x86
 * ftrace site ({@code [FTRACE]}) shows its handlers the frame Linux's ftrace trampoline builds
 * ({@code FtraceRegs}: {@code orig_ax} 0, not an {@code int3} frame's -1), and the engine writes
 * the trampoline call's return address just below the stack pointer, as the call does in Linux,
 * unless every enabled handler there declared it reads no memory ({@code Kprobe.readsNoMemory}: the
 * event engine's register-only events), which could not see it.
 * </li><li>
 * <b>Text coherence with a guest that patches itself.</b> Linux rewrites its own text at boot
 * (ftrace NOPs after verifying the old bytes, alternatives, static calls) and at run time (jump
 * labels, {@code text_poke} through an alias mapping). Two mechanisms keep probes out of its way:
 * (1) a booted kernel's probes are registered only when the guest reaches the point where Linux's
 * own {@code kprobe_event=} parameter registers them ({@code TracedBoot}: a machine breakpoint on
 * {@code init_kprobe_trace}, the fs_initcall that runs {@code setup_boot_kprobe_events}, or {@code
 * run_init_process} with {@code --from-init}), after the kernel's boot-time text patching, so no
 * verification ever meets a breakpoint; (2) the machine's {@code TextGuard} lists every probed
 * instruction with the bytes the host left there, and the instruction clock's translation hook
 * ({@code kpemu_clock_tb_generated}) compares guest memory (by <i>physical</i> address, so writes
 * through {@code text_poke}'s alias count) with them whenever Unicorn translates a block that
 * contains one. Unicorn 2.1.4 drops every translated block whose bytes a guest store changed (it
 * tracks code by physical page, so through any alias) and translates it again before it runs, so
 * rewritten text always meets the check before it runs (a block first tests its 32-byte granules
 * in a bitmap the host keeps of the granules guarded ranges touch, the clock's {@code
 * GranuleBitmap}, so only blocks near probed text look their page up in the hash table); on a
 * difference it stops the engine before the block, and the engine adopts the guest's new bytes as
 * the originals, re-decodes, rewrites the slot and re-arms ({@code TextWatch}). Before the engine
 * writes probed text itself it settles that range first. No Unicorn memory hook exists and the
 * check is made at translation, so an unhit probe costs guest loads, stores and running blocks
 * nothing at all.
 * </li><li>
 * <b>Jump optimization</b> plugs in through {@code ProbeOptimizer} ({@code
 * Kprobes.attachOptimizer}; {@code optprobes}' {@code JumpOptimizer.attach(kprobes)}): the engine
 * reports every probe change, asks the optimizer to put optimized sites back into breakpoint form
 * before it writes text itself, and at safe points (no handler running or step in flight on any
 * vCPU) lets it write pending jumps — only when no vCPU's pc is inside the displaced region and
 * the inputs' patch window is open on every vCPU (for a kernel: user mode or the idle loop; {@code
 * Vcpus}). The detour's first instruction carries a Unicorn <i>block</i> hook, in every vCPU's
 * engine, that runs the pre handlers on the live registers (x86 {@code ip} = probe + 1, arm64 the
 * probe address; ip changes ignored). Without an optimizer every probe is a breakpoint probe.
 * Details in {@code kprobes/README.md} and {@code JumpOptimizer}'s class comment.
 * </li><li>
 * <b>On a booted kernel</b> {@code TracedBoot} attaches the optimizer with {@code
 * KernelOptimizationInputs} (default on x86-64 as in Linux, off on arm64 where it is kpemu's
 * extension; {@code kpemu boot --optimize/--no-optimize}). While jumps are pending it puts host
 * breakpoints (not code hooks) on the kernel's return-to-user entries (x86 {@code
 * syscall_exit_to_user_mode}, {@code swapgs_restore_regs_and_return_to_usermode}; arm64 {@code
 * ret_to_user}), where no interrupted kernel context exists, so a jump is written at the next
 * return to user mode.
 * </li></ul>
 */
package dev.kpemu.kprobes;
