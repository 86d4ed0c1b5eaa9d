package dev.kpemu.kprobes.events;

/**
 * The per-entry context ftrace prints before the event ({@code trace_print_context}): task
 * comm as the saved-cmdlines cache knows it ({@code <...>} when unknown, {@code <idle>} for
 * pid 0), pid, cpu, the five latency characters and the timestamp in nanoseconds.
 * {@code tgid} is printed only when non-null (the {@code record-tgid} option); 0 prints
 * {@code (-------)}.
 */
public record TraceContext(String comm, int pid, Integer tgid, int cpu, String latency, long timestampNanos) {

    /** Without the tgid column (default options). */
    public TraceContext(String comm, int pid, int cpu, String latency, long timestampNanos) {
        this(comm, pid, null, cpu, latency, timestampNanos);
    }

    /**
     * {@code trace_print_lat_fmt}: irqs-off ({@code d}, {@code D} with BH off, {@code b} BH off
     * only, {@code .}), need-resched ({@code N} both, {@code n} TIF, {@code p} preempt,
     * {@code .}), hard/soft irq ({@code Z}/{@code z} NMI, {@code H}/{@code h}/{@code s}),
     * preempt depth and migrate-disable depth as hex digits or {@code .}.
     */
    public static String latency(boolean irqsOff, boolean bhOff, boolean needResched, boolean preemptResched,
                                 boolean nmi, boolean hardirq, boolean softirq, int preemptCount, int migrateDisable) {
        char irq = irqsOff && bhOff ? 'D' : irqsOff ? 'd' : bhOff ? 'b' : '.';
        char nr = needResched && preemptResched ? 'N' : needResched ? 'n' : preemptResched ? 'p' : '.';
        char hs = nmi && hardirq ? 'Z' : nmi ? 'z' : hardirq && softirq ? 'H' : hardirq ? 'h' : softirq ? 's' : '.';
        int pc = (preemptCount & 0xf) | ((migrateDisable & 0xf) << 4);
        String p1 = (pc & 0xf) != 0 ? Integer.toHexString(pc & 0xf) : ".";
        String p2 = (pc & 0xf0) != 0 ? Integer.toHexString(pc >> 4) : ".";
        return "" + irq + nr + hs + p1 + p2;
    }

    /** {@link #comm}'s bytes as the guest holds them ({@link GuestText}: comm need not be UTF-8). */
    public byte[] commBytes() { return GuestText.encode(comm); }
}
