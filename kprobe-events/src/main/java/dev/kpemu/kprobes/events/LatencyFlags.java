package dev.kpemu.kprobes.events;

/**
 * ftrace's trace context word and the latency column it prints, as Linux computes them when a
 * probe event is recorded.
 *
 * <p>{@code tracing_gen_ctx_irq_test} (kernel/trace/trace.c, the same in 6.1, 6.12 and 7.x)
 * packs the context into one word: {@code (flags << 16) | min(preempt_count() & 0xff, 0xf) |
 * min(current->migration_disabled, 0xf) << 4}, the flags being TRACE_FLAG_IRQS_OFF (the
 * interrupt state), NMI / HARDIRQ from preempt_count's NMI and HARDIRQ fields, SOFTIRQ when
 * serving a softirq ({@code preempt_count & SOFTIRQ_OFFSET}), BH_OFF when bottom halves are
 * disabled ({@code softirq_count() >> (SOFTIRQ_SHIFT + 1)}), NEED_RESCHED (TIF_NEED_RESCHED),
 * PREEMPT_RESCHED ({@code test_preempt_need_resched()}) and, from 6.13, NEED_RESCHED_LAZY
 * (0x02, TIF_NEED_RESCHED_LAZY). A probe event's record takes it from
 * {@code trace_event_buffer_reserve}'s {@code tracing_gen_ctx_dec()}: with CONFIG_PREEMPTION the
 * word is decremented by one to discount the preempt_disable the tracing path is assumed to hold
 * — an integer decrement, so when the preempt byte is 0 (an x86 {@code int3} hit, whose path
 * adds NMI and HARDIRQ counts but no preempt count) it borrows from the flags: the depth prints
 * {@code ff} and the IRQS_OFF flag is lost ({@code ..Zff}, as Linux prints it).
 *
 * <p>{@code trace_print_lat_fmt} (kernel/trace/trace_output.c) prints the entry's flags byte
 * ({@code trace_ctx >> 16}) and preempt byte ({@code trace_ctx & 0xff}) as five characters:
 * irqs-off ({@code D} with BH off, {@code d}, {@code b} BH off only, {@code .}), need-resched
 * ({@link #needReschedChar}), hard/soft irq ({@code Z} NMI in hardirq, {@code z} NMI, {@code H}
 * hardirq in softirq, {@code h}, {@code s}, {@code .}), then the preempt byte's low and high
 * nibble in hex ({@code .} for 0): preempt depth and migrate-disable depth.
 *
 * <p>What the guest state is at a hit and what each way of firing a probe adds to it before the
 * record is made: {@link LatencyPaths}; where the guest keeps it: {@link LatencyLayout}.
 */
public final class LatencyFlags {
    /** include/linux/preempt.h: the fields of preempt_count. */
    public static final int PREEMPT_MASK = 0xff, SOFTIRQ_OFFSET = 1 << 8, SOFTIRQ_MASK = 0xff00,
            HARDIRQ_OFFSET = 1 << 16, HARDIRQ_MASK = 0xf0000, NMI_OFFSET = 1 << 20, NMI_MASK = 0xf00000;
    private static final int SOFTIRQ_SHIFT = 8;

    /** include/linux/trace_events.h: {@code enum trace_flag_type}. */
    public static final int IRQS_OFF = 0x01, NEED_RESCHED_LAZY = 0x02, NEED_RESCHED = 0x04, HARDIRQ = 0x08,
            SOFTIRQ = 0x10, PREEMPT_RESCHED = 0x20, NMI = 0x40, BH_OFF = 0x80;

    /**
     * The state {@code tracing_gen_ctx_irq_test} reads, at the moment of the record.
     *
     * @param irqsOff            interrupts disabled ({@code irqs_disabled_flags(local_save_flags())})
     * @param preemptCount       {@code preempt_count()} (without x86's folded PREEMPT_NEED_RESCHED bit)
     * @param needResched        TIF_NEED_RESCHED in {@code current_thread_info()->flags}
     * @param needReschedLazy    TIF_NEED_RESCHED_LAZY (kernels with CONFIG_ARCH_HAS_PREEMPT_LAZY)
     * @param preemptNeedResched {@code test_preempt_need_resched()}
     * @param migrationDisabled  {@code current->migration_disabled}
     */
    public record State(boolean irqsOff, int preemptCount, boolean needResched, boolean needReschedLazy,
                        boolean preemptNeedResched, int migrationDisabled) {}

    private LatencyFlags() {}

    /**
     * {@code tracing_gen_ctx_irq_test} on {@code s}, then {@code tracing_gen_ctx_dec}'s decrement
     * when {@code preemption} (CONFIG_PREEMPTION) — the word a probe event's record carries.
     */
    public static int traceContext(State s, boolean preemption) {
        int pc = s.preemptCount();
        int flags = s.irqsOff() ? IRQS_OFF : 0;
        if ((pc & NMI_MASK) != 0) flags |= NMI;
        if ((pc & HARDIRQ_MASK) != 0) flags |= HARDIRQ;
        if ((pc & SOFTIRQ_OFFSET) != 0) flags |= SOFTIRQ;                       // in_serving_softirq()
        if (((pc & SOFTIRQ_MASK) >>> (SOFTIRQ_SHIFT + 1)) != 0) flags |= BH_OFF; // softirq_count() >> (SOFTIRQ_SHIFT + 1)
        if (s.needResched()) flags |= NEED_RESCHED;
        if (s.preemptNeedResched()) flags |= PREEMPT_RESCHED;
        if (s.needReschedLazy()) flags |= NEED_RESCHED_LAZY;
        int ctx = (flags << 16) | Math.min(pc & PREEMPT_MASK, 0xf) | Math.min(Math.max(s.migrationDisabled(), 0), 0xf) << 4;
        return preemption ? ctx - 1 : ctx;
    }

    /** The entry's {@code common_flags} byte. */
    public static int flags(int traceContext) { return (traceContext >>> 16) & 0xff; }

    /** The entry's {@code common_preempt_count} byte (preempt depth, migrate-disable depth in the high nibble). */
    public static int preemptCount(int traceContext) { return traceContext & 0xff; }

    /** {@code trace_print_lat_fmt}: the five latency characters of a trace context word. */
    public static String column(int traceContext) {
        int key = (flags(traceContext) << 8) | preemptCount(traceContext);
        String c = COLUMNS[key];
        if (c == null) COLUMNS[key] = c = columnText(traceContext);   // a race makes an equal string twice: harmless
        return c;
    }

    /** Every column text made so far, by flags byte and preempt byte: a hit's column is one array load. */
    private static final String[] COLUMNS = new String[1 << 16];

    private static String columnText(int traceContext) {
        int f = flags(traceContext), pc = preemptCount(traceContext);
        boolean irqsOff = (f & IRQS_OFF) != 0, bhOff = (f & BH_OFF) != 0;
        char irq = irqsOff && bhOff ? 'D' : irqsOff ? 'd' : bhOff ? 'b' : '.';
        boolean nmi = (f & NMI) != 0, hard = (f & HARDIRQ) != 0, soft = (f & SOFTIRQ) != 0;
        char hs = nmi && hard ? 'Z' : nmi ? 'z' : hard && soft ? 'H' : hard ? 'h' : soft ? 's' : '.';
        char p1 = (pc & 0xf) != 0 ? Character.forDigit(pc & 0xf, 16) : '.';
        char p2 = (pc & 0xf0) != 0 ? Character.forDigit(pc >> 4, 16) : '.';
        return new String(new char[]{irq, needReschedChar(f), hs, p1, p2});
    }

    /**
     * The need-resched character of a flags byte. Up to 6.12: {@code N} (NEED_RESCHED and
     * PREEMPT_RESCHED), {@code n}, {@code p}, {@code .}; from 6.13 with the lazy flag (0x02, never
     * set by earlier kernels, whose 0x02 was the unused IRQS_NOSUPPORT): {@code B} (all three),
     * {@code L} (lazy and PREEMPT_RESCHED), {@code b} (NEED_RESCHED and lazy), {@code l} (lazy).
     */
    public static char needReschedChar(int flags) {
        return switch (flags & (NEED_RESCHED | NEED_RESCHED_LAZY | PREEMPT_RESCHED)) {
            case NEED_RESCHED | NEED_RESCHED_LAZY | PREEMPT_RESCHED -> 'B';
            case NEED_RESCHED | PREEMPT_RESCHED -> 'N';
            case NEED_RESCHED_LAZY | PREEMPT_RESCHED -> 'L';
            case NEED_RESCHED | NEED_RESCHED_LAZY -> 'b';
            case NEED_RESCHED -> 'n';
            case PREEMPT_RESCHED -> 'p';
            case NEED_RESCHED_LAZY -> 'l';
            default -> '.';
        };
    }

    /**
     * The {@code common_flags} byte a printed latency column stands for (the inverse of
     * {@link #column}; exact except for a softirq bit hidden behind {@code Z}/{@code z}, which
     * the column does not show).
     */
    public static int flagsOf(String latency) {
        if (latency == null || latency.length() < 3) return 0;
        int f = switch (latency.charAt(0)) {
            case 'D' -> IRQS_OFF | BH_OFF;
            case 'd' -> IRQS_OFF;
            case 'b' -> BH_OFF;
            default -> 0;
        };
        f |= switch (latency.charAt(1)) {
            case 'B' -> NEED_RESCHED | NEED_RESCHED_LAZY | PREEMPT_RESCHED;
            case 'N' -> NEED_RESCHED | PREEMPT_RESCHED;
            case 'L' -> NEED_RESCHED_LAZY | PREEMPT_RESCHED;
            case 'b' -> NEED_RESCHED | NEED_RESCHED_LAZY;
            case 'n' -> NEED_RESCHED;
            case 'p' -> PREEMPT_RESCHED;
            case 'l' -> NEED_RESCHED_LAZY;
            default -> 0;
        };
        f |= switch (latency.charAt(2)) {
            case 'Z' -> NMI | HARDIRQ;
            case 'z' -> NMI;
            case 'H' -> HARDIRQ | SOFTIRQ;
            case 'h' -> HARDIRQ;
            case 's' -> SOFTIRQ;
            default -> 0;
        };
        return f;
    }

    /** The {@code common_preempt_count} byte a printed latency column stands for. */
    public static int preemptCountOf(String latency) {
        if (latency == null || latency.length() < 5) return 0;
        return nibble(latency.charAt(3)) | nibble(latency.charAt(4)) << 4;
    }

    private static int nibble(char c) {
        int d = Character.digit(c, 16);
        return d < 0 ? 0 : d;
    }
}
