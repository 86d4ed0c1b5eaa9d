/**
 * The probe-language front end: Linux's {@code kprobe_events} language parsed with the
 * kernel's own error_log messages and caret positions ({@link dev.kpemu.kprobes.events.ProbeParser},
 * {@link dev.kpemu.kprobes.events.ProbeSyntaxException}), fetch plans the engine runs on each hit
 * ({@link dev.kpemu.kprobes.events.CompiledProbe} over a {@link dev.kpemu.kprobes.events.FetchContext}),
 * and the tracefs text: trace lines, listing, kprobe_profile and format files
 * ({@link dev.kpemu.kprobes.events.TraceFormatter}). Default behaviour is Linux 6.1's (Debian 12).
 */
package dev.kpemu.kprobes.events;
