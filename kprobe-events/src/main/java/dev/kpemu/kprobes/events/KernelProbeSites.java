package dev.kpemu.kprobes.events;

import java.util.Arrays;
import java.util.List;
import java.util.OptionalLong;

import dev.kpemu.image.KernelTextTables;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.kprobes.Errno;
import dev.kpemu.kprobes.KernelProbeRules;
import dev.kpemu.kprobes.KprobeException;
import dev.kpemu.kprobes.ProbeDecoder;
import dev.kpemu.kprobes.SymbolResolver;
import dev.kpemu.machine.Arch;

/**
 * {@link ProbeSites} of a kernel file, answered before boot in the order Linux's
 * {@code __register_trace_kprobe} checks after boot: notrace functions, then
 * {@code register_kprobe}'s address adjustment, address rules ({@link KernelProbeRules}) and the
 * arch's decision on the instruction ({@link ProbeDecoder}), on the text as the file holds it.
 */
public final class KernelProbeSites implements ProbeSites, AutoCloseable {
    private final Arch arch;
    private final SymbolTable syms;
    /** The kernel file: read at the probed sites, and whole only for what needs it (arm64's relocations). */
    private final dev.kpemu.image.OnDemandFileBytes file;
    private final KernelProbeRules rules;
    /** The kernel's tables: its boot-patched sites are decided on the running kernel's text, not here. */
    private final KernelTextTables tables;
    private final ProbeDecoder decoder;
    private final SymbolResolver resolver;

    public KernelProbeSites(Arch arch, SymbolTable syms, byte[] file) {
        this(arch, syms, KernelTextTables.read(arch, syms, file), file);
    }

    /** With the kernel's text tables already read ({@code tables}: of the kernel of {@code syms} and {@code file}). */
    public KernelProbeSites(Arch arch, SymbolTable syms, KernelTextTables tables, byte[] file) {
        this(arch, syms, tables, dev.kpemu.image.OnDemandFileBytes.inMemory(file, "kernel file"));
    }

    /** As above, the kernel file read where asked. */
    public KernelProbeSites(Arch arch, SymbolTable syms, KernelTextTables tables, dev.kpemu.image.OnDemandFileBytes file) {
        this.arch = arch;
        this.syms = syms;
        this.file = file;
        this.rules = new KernelProbeRules(arch, syms, tables);
        this.tables = tables;
        this.decoder = ProbeDecoder.open(arch);
        this.resolver = SymbolResolver.of(syms);
    }

    private boolean notraceBySymbol;
    private Dialect dialect = Dialect.LINUX_6_1;
    /** The functions ftrace can trace ({@code available_filter_functions}): those holding an ftrace site; built on first use. */
    private java.util.Set<String> ftraceFunctions;

    /**
     * The kernel whose messages to print: from 6.10 trace_kprobe names a refused notrace function
     * with {@code %ps} of the probed address (recorded: {@code _stext} for 0xffffffff81000000 on
     * 6.12), before that with the probe's symbol ({@code unknown} for an address).
     */
    public KernelProbeSites dialect(Dialect d) {
        this.notraceBySymbol = d.hasBtfArgs();
        this.dialect = d;
        rules.refusesExceptionInstructions(d.refusesExceptionInstructions());
        return this;
    }

    /** The kernel's address rules, for the engine that registers these probes on the running kernel. */
    public KernelProbeRules rules() { return rules; }

    @Override
    public Answer check(TraceProbe probe) {
        if (probe instanceof FprobeDef f) return checkFprobe(f);
        if (probe instanceof WprobeDef) return null;   // data, not a code site: checked when it is watched
        Target t = target(probe, name -> syms.byName(name).map(x -> OptionalLong.of(x.address())).orElse(OptionalLong.empty()));
        if (t == null) return null;   // a module's symbol (deferred until it loads) or unknown (the parser reports it)
        long address = t.address();
        String symbolForMessage = !notraceBySymbol ? t.name()
                : resolver.lookup(address).map(SymbolResolver.SymbolInfo::name).orElse(String.format("0x%x", address));
        if (rules.withinNotraceFunction(address)) {
            return new Answer(EventEngine.registrationError(probe, new KprobeException(Errno.EINVAL, "notrace function")),
                    List.of(notraceMessage(symbolForMessage)));
        }
        try {
            SymbolResolver.SymbolInfo sym = resolver.lookup(address)
                    .orElseThrow(() -> new KprobeException(Errno.ENOENT, String.format("0x%x is in no symbol", address)));
            ProbeDecoder.ProbeAddress where = decoder.adjustAddress(sym.start(), address - sym.start(), this::text);
            if (!sym.text()) throw new KprobeException(Errno.EINVAL, sym.name() + " is not text");
            rules.check(where.address(), sym);
            var patched = decidedOnRunningKernel(where.address());
            if (patched.isPresent())
                return new Answer(null, List.of(), String.format("%s+%d is in a %s site the kernel rewrites while it boots: accepted here, decided when it is registered on the running kernel's text",
                        sym.name(), where.address() - sym.start(), patched.get().name()));
            if (rules.refusesExceptionInstructions() && decoder.isExceptionInstruction(where.address(), this::text))
                throw new KprobeException(Errno.EILSEQ, String.format("0x%x raises an exception by design (INT or UD)", where.address()));
            decoder.prepare(where.address(), this::text, sym);
            return null;
        } catch (KprobeException e) {
            if (e.errno() == Errno.ENOENT && probe.target() instanceof ProbeTarget.AddressTarget) {
                // trace_kprobe keeps a probe whose address no symbol holds, for a module to come
                return new Answer(null, List.of(DEFERRED_MESSAGE));
            }
            return new Answer(EventEngine.registrationError(probe, e), List.of());
        }
    }

    /**
     * The boot-patched site ({@link KernelTextTables#bootPatchedSites()}: alternatives, paravirt
     * calls, retpoline, return-thunk and call-depth sites) holding {@code address}, if any. What
     * the file holds there is not what the running kernel runs — Linux decodes the instruction and
     * its boundary on the patched text (recorded: 6.1 accepts {@code p get_old_pud+178}, a
     * {@code call *pv_ops(%rip)} in the file that boot patching turned into a direct call) — so the
     * check before boot leaves the instruction to the engine's registration on the running kernel,
     * which reads guest memory; the address rules are still checked here.
     */
    public java.util.Optional<KernelTextTables.Range> decidedOnRunningKernel(long address) {
        // call-depth sites change only with X86_FEATURE_CALL_DEPTH (retbleed=stuff), which neither
        // QEMU's qemu64 nor kpemu's CPU leads Linux to select: the file's text is the running text
        // (recorded: 6.12 refuses p schedule_tail+11, inside a call, as the file says)
        return tables.bootPatchedSiteAt(address, r -> !r.name().equals("call depth"));
    }

    /**
     * {@code register_trace_fprobe}: a new event named as one of the kernel's own trace events is
     * refused (EVENT_EXIST: EEXIST on 6.12, EINVAL on 7.2, recorded); a tracepoint probe is then
     * accepted (a tracepoint not in the kernel is kept for a module); an fprobe's function is an
     * ftrace filter ({@code register_fprobe}: a name or a glob) that must match a function ftrace
     * can trace, else the error of that kernel (6.12: "Failed to register probe event", 7.2:
     * "Invalid probed address or symbol"; EINVAL both).
     */
    private Answer checkFprobe(FprobeDef f) {
        String system = kernelEventSystem(f.event());
        if (system != null && system.equals(f.group())) {
            return new Answer(ProbeSyntaxException.registration(f.command(), 0, 0, KernelError.EVENT_EXIST,
                    dialect.eventExistIsEinval() ? Errno.EINVAL : Errno.EEXIST, FprobeDef.SUBSYSTEM), List.of());
        }
        if (f.tracepoint()) return null;
        java.util.function.Predicate<String> match = ftraceFilter(f.symbol());
        if (ftraceFunctions().stream().anyMatch(match)) return null;
        KernelError e = dialect.fprobeMissingSymbolIsBadAddress() ? KernelError.BAD_PROBE_ADDR : KernelError.FAIL_REG_PROBE;
        return new Answer(ProbeSyntaxException.registration(f.command(), 1, 0, e, Errno.EINVAL, FprobeDef.SUBSYSTEM), List.of());
    }

    /** An ftrace filter ({@code filter_parse_regex}): a name, or a glob when it holds {@code *}, {@code ?} or {@code [}. */
    static java.util.function.Predicate<String> ftraceFilter(String filter) {
        if (filter.chars().noneMatch(c -> c == '*' || c == '?' || c == '[')) return filter::equals;
        java.util.regex.Pattern p = ProbeGlob.pattern(filter);
        return n -> p.matcher(n).matches();
    }

    /** The names of the functions holding an ftrace site: what {@code available_filter_functions} lists. */
    public java.util.Set<String> ftraceFunctions() {
        if (ftraceFunctions == null) {
            java.util.Set<String> names = new java.util.HashSet<>();
            for (long site : rules.tables().ftraceSites())
                resolver.lookup(site).filter(SymbolResolver.SymbolInfo::text).ifPresent(s -> names.add(s.name()));
            ftraceFunctions = names;
        }
        return ftraceFunctions;
    }

    /**
     * The system (group) of the kernel's own trace event {@code event}, read from the kernel file:
     * the {@code struct trace_event_call event_EVENT} points at its {@code struct trace_event_class}
     * (after the call's {@code struct list_head}), whose first member is the system's name. Null
     * when the kernel has no such event or the file does not hold the pointers.
     */
    String kernelEventSystem(String event) {
        var call = syms.byName("event_" + event);
        if (call.isEmpty()) return null;
        long cls = readLong(call.get().address() + 16);
        if (cls == 0) return null;
        long name = readLong(cls);
        if (name == 0) return null;
        byte[] s = text(name, 64);
        int n = 0;
        while (n < s.length && s[n] != 0) n++;
        return n == 0 || n == s.length ? null : new String(s, 0, n, java.nio.charset.StandardCharsets.ISO_8859_1);
    }

    /**
     * A pointer in the kernel's data as linked: in place, or on arm64 (whose Image leaves absolute
     * pointers 0 and relocates them at boot) the addend of its RELATIVE relocation.
     */
    private long readLong(long va) {
        long v = java.nio.ByteBuffer.wrap(text(va, 8)).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong();
        // a fact about the file: only the arm64 Image leaves absolute pointers to its relocations
        if (v != 0 || arch != Arch.ARM64) return v;
        if (relocations == null) relocations = dev.kpemu.image.Arm64Relocations.of(file.bytes());
        return relocations.valueAt(va).orElse(0);
    }

    private dev.kpemu.image.Arm64Relocations relocations;

    /** The address trace_kprobe checks ({@code trace_kprobe_address}) and the name its messages give it. */
    record Target(long address, String name) {}

    /** The probe's address by {@code lookup}, or null for a module's symbol or an unknown one. */
    static Target target(TraceProbe probe, java.util.function.Function<String, OptionalLong> lookup) {
        return switch (probe.target()) {
            case ProbeTarget.SymbolTarget s -> {
                if (s.module() != null) yield null;
                OptionalLong a = lookup.apply(s.symbol());
                yield a.isEmpty() ? null : new Target(a.getAsLong() + s.offset(), s.symbol());
            }
            case ProbeTarget.AddressTarget a -> new Target(a.address(), "unknown");
        };
    }

    /** What trace_kprobe prints when registration finds no symbol and it keeps the probe for a module. */
    public static final String DEFERRED_MESSAGE = "trace_kprobe: This probe might be able to register after target module is loaded. Continue.";

    /** What trace_kprobe prints (pr_warn) when it refuses a notrace function. */
    public static String notraceMessage(String symbol) {
        return "trace_kprobe: Could not probe notrace function " + symbol;
    }

    /** Original text from the file (zeros where the file has none). */
    private byte[] text(long va, int len) {
        byte[] out = new byte[len];
        OptionalLong off = syms.fileOffset(va);
        if (off.isEmpty()) return out;
        long from = off.getAsLong();
        int n = (int) Math.max(0, Math.min(len, file.length() - from));
        if (n > 0) System.arraycopy(file.read(from, n), 0, out, 0, n);
        return out;
    }

    @Override
    public void close() { decoder.close(); }
}
