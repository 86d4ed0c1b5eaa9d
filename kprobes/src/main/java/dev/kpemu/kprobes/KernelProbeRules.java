package dev.kpemu.kprobes;

import java.util.List;
import java.util.Optional;

import dev.kpemu.image.KernelTextTables;
import dev.kpemu.image.Symbol;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;

/**
 * Linux's rules for a kernel, from the tables in its file ({@link KernelTextTables}), for probes
 * registered after boot (the kernel has freed its init text and ftrace's init records):
 * <ul>
 * <li>{@code check_ftrace_location}: on x86-64 a probe exactly on an ftrace call site becomes a
 *     kprobe on ftrace ({@link Kprobe#FLAG_FTRACE}); arm64 has no KPROBES_ON_FTRACE and refuses
 *     it (EINVAL);</li>
 * <li>{@code check_kprobe_address_safe}: outside the core kernel text (init text included once
 *     freed), the kprobe blacklist (with {@code foo.cold} counted as {@code foo}), a jump-label or
 *     static-call site, a {@code BUG()} trap: EINVAL; on arm64 also an instruction with an
 *     exception-table entry ({@code arch_prepare_kprobe});</li>
 * <li>trace_kprobe's {@code within_notrace_func}: a kprobe event in a function without any ftrace
 *     site is refused ("Could not probe notrace function").</li>
 * </ul>
 */
public final class KernelProbeRules implements AddressRules {
    private final ArchSiteRules siteRules;
    private final SymbolTable syms;
    private final KernelTextTables tables;
    private final KernelTextTables.Range coreText, initText;
    private RangeIndex blacklist, jumpLabels, staticCalls;   // built at first use
    private boolean initTextFreed = true;
    private java.util.function.LongPredicate moduleText = a -> false, moduleFtraceSite = a -> false;

    public KernelProbeRules(Arch arch, SymbolTable syms, KernelTextTables tables) {
        this.siteRules = ArchSiteRules.of(arch);
        this.syms = syms;
        this.tables = tables;
        this.coreText = tables.section("_stext", "_etext").orElse(null);
        this.initText = tables.section("_sinittext", "_einittext").orElse(null);
    }

    public KernelTextTables tables() { return tables; }

    /**
     * Whether the kernel has freed its init text (the default: probes registered after boot).
     * Before, init text is core kernel text and its functions keep their ftrace records, so
     * probes from early boot may go there ({@code kprobe_event=}); {@link Kprobes#killRange}
     * kills them when the kernel frees it.
     */
    private boolean refusesExceptionInstructions;

    /** Linux 6.4 and later: {@code can_probe} refuses INT and UD instructions ({@link AddressRules#refusesExceptionInstructions}). */
    public KernelProbeRules refusesExceptionInstructions(boolean refuses) {
        this.refusesExceptionInstructions = refuses;
        return this;
    }

    @Override public boolean refusesExceptionInstructions() { return refusesExceptionInstructions; }

    public KernelProbeRules initTextFreed(boolean freed) {
        this.initTextFreed = freed;
        return this;
    }

    /** {@code is_module_text_address}: text of a loaded module, where probes may go too. */
    public KernelProbeRules moduleText(java.util.function.LongPredicate inModuleText, java.util.function.LongPredicate ftraceSite) {
        this.moduleText = inModuleText;
        this.moduleFtraceSite = ftraceSite;
        return this;
    }

    /** [_sinittext, _einittext), or null. */
    public KernelTextTables.Range initText() { return initText; }

    @Override
    public int check(long address, SymbolResolver.SymbolInfo symbol) {
        if (moduleText.test(address)) {
            // the vmlinux tables say nothing about a module's text; its ftrace sites come from its code
            if (!moduleFtraceSite.test(address)) return 0;
            if (!siteRules.probesOnFtrace()) throw new KprobeException(Errno.EINVAL, String.format("0x%x is an ftrace site (no kprobes on ftrace on this arch)", address));
            return Kprobe.FLAG_FTRACE;
        }
        int flags = 0;
        if (tables.ftraceSites().contains(address)) {
            if (!siteRules.probesOnFtrace()) throw new KprobeException(Errno.EINVAL, String.format("0x%x is an ftrace site (no kprobes on ftrace on this arch)", address));
            flags |= Kprobe.FLAG_FTRACE;
        }
        boolean liveInit = !initTextFreed && initText != null && initText.contains(address);
        if (coreText != null && !coreText.contains(address) && !liveInit) {
            throw new KprobeException(Errno.EINVAL, String.format("0x%x is not core kernel text%s", address,
                    initText != null && initText.contains(address) ? " (init text, freed after boot)" : ""));
        }
        KernelTextTables.Range b = blacklisted(address);
        if (b != null) throw new KprobeException(Errno.EINVAL, String.format("0x%x is blacklisted (%s)", address, b.name()));
        if (jumpLabels == null) {
            jumpLabels = new RangeIndex(tables.jumpLabels());
            staticCalls = new RangeIndex(tables.staticCalls());
        }
        for (RangeIndex sites : List.of(jumpLabels, staticCalls)) {
            KernelTextTables.Range r = sites.find(address);
            if (r != null) throw new KprobeException(Errno.EINVAL, String.format("0x%x is a %s site", address, r.name()));
        }
        if (tables.bugSites().contains(address)) throw new KprobeException(Errno.EINVAL, String.format("0x%x is a BUG() trap", address));
        if (siteRules.refusesExceptionTableSites() && tables.exceptionTable().contains(address)) {
            // arm64's arch_prepare_kprobe: an instruction that may fault into a fixup cannot be stepped out of line
            throw new KprobeException(Errno.EINVAL, String.format("0x%x has an exception-table entry", address));
        }
        return flags;
    }

    /** {@code within_kprobe_blacklist}: the range holding {@code address}, also through a {@code .suffix}ed symbol's base name. */
    public KernelTextTables.Range blacklisted(long address) {
        KernelTextTables.Range r = find(address);
        if (r != null) return r;
        Optional<Symbol> s = syms.lookup(address);
        if (s.isEmpty()) return null;
        int dot = s.get().name().indexOf('.');
        if (dot <= 0) return null;
        Optional<Symbol> base = syms.byName(s.get().name().substring(0, dot));
        return base.isPresent() ? find(base.get().address()) : null;
    }

    private KernelTextTables.Range find(long address) {
        if (blacklist == null) blacklist = new RangeIndex(tables.kprobeBlacklist());
        return blacklist.find(address);
    }

    /**
     * trace_kprobe's {@code within_notrace_func}: true when the function holding {@code address}
     * has no ftrace site (after boot, none in init text), unless it is a {@code .suffix}ed part
     * of a function that has one.
     */
    public boolean withinNotraceFunction(long address) {
        if (!notrace(address)) return false;
        Optional<Symbol> s = syms.lookup(address);
        int dot = s.get().name().indexOf('.');
        if (dot <= 0) return true;
        Optional<Symbol> base = syms.byName(s.get().name().substring(0, dot));
        return base.isEmpty() || notrace(base.get().address());
    }

    /** {@code __within_notrace_func}: an address kallsyms does not resolve is not "notrace" (recorded: arm64 6.1 accepts {@code p 0xffff800008000000}). */
    private boolean notrace(long address) {
        Optional<Symbol> s = syms.lookup(address);
        if (s.isEmpty()) return false;
        if (s.get().size() == 0) return true;
        long start = s.get().address(), last = start + s.get().size() - 1;
        if (initTextFreed && initText != null && initText.contains(start)) return true;   // ftrace dropped init records
        Long site = tables.ftraceSites().ceiling(start);
        return site == null || Long.compareUnsigned(site, last) > 0;
    }
}
