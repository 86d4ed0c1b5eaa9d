package dev.kpemu.kprobes.events.filter;

/**
 * Where kernels differ in event filters and in the filters of hist triggers, as Linux itself
 * answered the same writes under QEMU ({@code guest-images/reference/ARCH/SERIES/filters.filter-errors},
 * record-filters.sh):
 *
 * @param trailingOperatorIgnored a filter ending in {@code &&} or {@code ||} is taken, as the
 *        filter before that operator (unstable's 7.2); 6.1 and 6.12 refuse it with "Meaningless
 *        filter expression", the caret at its end
 * @param triggerFilterLogged a hist trigger whose {@code if} filter does not parse logs the
 *        filter's own parse error in error_log (6.12, 7.2); 6.1 fails the write and logs nothing
 * @param cpumaskValues a predicate's value may be a cpulist, {@code CPUS{0-2,5}}, on the cpu field
 *        and on number fields (Linux 6.6, "tracing/filters: Enable filtering the CPU common field by
 *        a cpumask" and "... a scalar field by a cpumask"): 6.12 and 7.2; 6.1 refuses it as
 *        "Invalid value". Not recorded under QEMU yet: written from the kernel's {@code parse_pred}
 */
public record FilterDialect(boolean trailingOperatorIgnored, boolean triggerFilterLogged, boolean cpumaskValues) {
    /** Debian 12's 6.1. */
    public static final FilterDialect LINUX_6_1 = new FilterDialect(false, false, false);
    /** Debian 13's 6.12. */
    public static final FilterDialect LINUX_6_12 = new FilterDialect(false, true, true);
    /** Debian unstable's 7.2. */
    public static final FilterDialect LINUX_7 = new FilterDialect(true, true, true);
}
