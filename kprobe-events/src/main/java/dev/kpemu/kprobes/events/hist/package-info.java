/**
 * ftrace's hist triggers ({@code events/GROUP/EVENT/trigger}, {@code hist:keys=...}) for kprobe
 * events: {@link dev.kpemu.kprobes.events.hist.HistSpec} parses the command,
 * {@link dev.kpemu.kprobes.events.hist.HistTrigger} counts records and prints the {@code hist}
 * file, its entries ordered as Linux 6.1 orders them ({@link dev.kpemu.kprobes.events.hist.KernelSort}).
 */
package dev.kpemu.kprobes.events.hist;
