/**
 * Module <code>session</code>, package <code>dev.kpemu.session</code>.
 *
 * <p>the composition root: <code>TracedBoot</code> (a boot with kprobe_events definitions, filters/triggers (<code>setup</code>) and extra event sinks (<code>addSink</code>), the kprobes engine and the jump optimizer attached at the registration point; the identity a recorded trace's header names; every event goes to its sinks as it happens, the CLI keeps none: <code>keepRecords(false)</code>), used by <code>cli</code> and <code>api</code> alike
 *
 * <p><b>What {@code TracedBoot} does in a boot.</b>
 * {@code BootHooks} let a caller act on the guest: {@code TracedBoot} checks the kprobe_events
 * definitions against the kernel file before the first instruction, as Linux would check them
 * after boot ({@code KernelProbeSites}: syntax, symbols, notrace functions, blacklist, reserved
 * sites, the instruction; a bad one exits 2 with the kernel's error_log; {@code --allow-unsafe}
 * skips the site rules as kpemu's extension; globs in the probed symbol, kpemu's extension, are
 * expanded there by {@code ProbeGlob} into the matches Linux would accept, the others skipped with
 * a summary line), and registers them where Linux's {@code kprobe_event=} boot parameter does: at
 * the return of {@code init_kprobe_trace} (an fs initcall, long after the kernel's boot-time text
 * patching; {@code --from-init}: at {@code run_init_process}). There it attaches the kprobes
 * engine (slots in the host area, mapped 2 MiB below the kernel image: x86-64 with one 2 MiB page
 * in the kernel-image page table, arm64 with tables in memory the device tree reserves, so the
 * kernel's boot-time W+X page-table walk can read them; kretprobes return through the kernel's own
 * trampoline) and the event engine ({@code task_struct} offsets from the kernel's BTF), which
 * prints every hit in ftrace's format. At {@code kprobe_free_init_mem} the probes in init text are
 * killed, as Linux kills them.
 */
package dev.kpemu.session;
