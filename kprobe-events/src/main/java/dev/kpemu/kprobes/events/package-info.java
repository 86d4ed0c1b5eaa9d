/**
 * Linux's kprobe-event subsystem ({@code kprobe_events}) for kpemu guests.
 *
 * <p>The front end: the {@code kprobe_events} language parsed with the kernel's own error_log
 * messages and caret positions ({@link dev.kpemu.kprobes.events.ProbeParser},
 * {@link dev.kpemu.kprobes.events.ProbeSyntaxException}), fetch plans run on each hit
 * ({@link dev.kpemu.kprobes.events.CompiledProbe} over a {@link dev.kpemu.kprobes.events.FetchContext}),
 * and the tracefs text: trace lines, listing, kprobe_profile and format files
 * ({@link dev.kpemu.kprobes.events.TraceFormatter}).
 *
 * <p>The engine: {@link dev.kpemu.kprobes.events.EventEngine} turns definitions into kprobes and
 * kretprobes on a {@link dev.kpemu.kprobes.Kprobes} engine (multiprobe rules, deletes,
 * registration errors, enable/disable, kprobe_profile, format files, error_log); each hit
 * fetches through {@link dev.kpemu.kprobes.events.MachineFetchContext} (registers, kernel and
 * user memory through the guest page tables, the current task as
 * {@link dev.kpemu.kprobes.events.TaskLayout} says) and prints one trace line
 * ({@link dev.kpemu.kprobes.events.TraceRecord}, with its arguments typed:
 * {@link dev.kpemu.kprobes.events.EventArg}).
 *
 * <p>What users do with the events, as ftrace: event filters ({@code filter} subpackage), hist
 * triggers ({@code hist} subpackage), over the fields {@link dev.kpemu.kprobes.events.EventFields}
 * names; {@link dev.kpemu.kprobes.events.EventSetup} holds the filters, triggers and disabled
 * events given before a boot, {@link dev.kpemu.kprobes.events.RecordedSetupErrors} Linux's
 * recorded answers to refused ones.
 *
 * <p>Regression against Linux itself: {@link dev.kpemu.kprobes.events.ReferenceTrace} reads the
 * traces recorded under QEMU ({@code guest-images/reference}),
 * {@link dev.kpemu.kprobes.events.TraceComparator} compares kpemu's lines with them (exactly on
 * the recorded kernel build, tolerantly on a rebuilt one; the rule is in its documentation).
 *
 * <p>Default behaviour is Linux 6.1's (Debian 12).
 */
package dev.kpemu.kprobes.events;
