/**
 * ftrace's event filters ({@code events/GROUP/EVENT/filter}, a trigger's {@code if ...}) for
 * kprobe events: {@link dev.kpemu.kprobes.events.filter.EventFilter} parses the kernel's grammar
 * with its errors ({@link dev.kpemu.kprobes.events.filter.FilterParseException}: the filter file's
 * text and the error_log entry) and matches records; string patterns as
 * {@link dev.kpemu.kprobes.events.filter.FilterPattern}.
 *
 * <p>(Shared with <code>dev.kpemu.kprobes.events.hist</code>.) what users do with events, as ftrace: <code>EventFilter</code> (the kernel's filter grammar by recursive descent, Linux 6.1's errors and caret positions, <code>FilterPattern</code> globs), <code>HistTrigger</code> + <code>HistSpec</code> (hist triggers: keys with modifiers, values, sort, size; entries ordered as <code>tracing_map_sort_entries</code> does: by key bytes (<code>detect_dups</code>), then the booted kernel's own <code>lib/sort.c</code> heapsort (<code>KernelSort</code>: 6.1's, or 6.12's), then the second sort key; the <code>hist</code> file's text); in <code>events</code>: <code>EventFields</code> (the fields filters and hist name: arguments, <code>__probe_*</code>, <code>common_*</code>, <code>comm</code>, <code>cpu</code>), <code>EventArg</code> (typed argument values on each <code>TraceRecord</code>), <code>EventSetup</code> (filters, triggers, disabled events given before boot)
 */
package dev.kpemu.kprobes.events.filter;
