package dev.kpemu.kprobes;

/**
 * The arch's part of {@link KernelProbeRules}: which kernel sites its {@code arch_prepare_kprobe}
 * and Kconfig refuse.
 *
 * @param probesOnFtrace {@code CONFIG_KPROBES_ON_FTRACE}: a probe on an ftrace call site is armed
 *        through ftrace (x86); without it (arm64) such a probe is refused with EINVAL
 * @param refusesExceptionTableSites an instruction with an exception-table entry cannot be stepped
 *        out of line (arm64's {@code arch_prepare_kprobe}: {@code search_exception_tables})
 */
public record ArchSiteRules(boolean probesOnFtrace, boolean refusesExceptionTableSites) {
    /** The rules of {@code arch}. */
    public static ArchSiteRules of(dev.kpemu.machine.Arch arch) { return ArchBackEnds.siteRules(arch); }
}
