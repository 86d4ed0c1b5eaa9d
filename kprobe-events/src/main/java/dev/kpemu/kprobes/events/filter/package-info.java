/**
 * ftrace's event filters ({@code events/GROUP/EVENT/filter}, a trigger's {@code if ...}) for
 * kprobe events: {@link dev.kpemu.kprobes.events.filter.EventFilter} parses the kernel's grammar
 * with its errors ({@link dev.kpemu.kprobes.events.filter.FilterParseException}: the filter file's
 * text and the error_log entry) and matches records; string patterns as
 * {@link dev.kpemu.kprobes.events.filter.FilterPattern}.
 */
package dev.kpemu.kprobes.events.filter;
