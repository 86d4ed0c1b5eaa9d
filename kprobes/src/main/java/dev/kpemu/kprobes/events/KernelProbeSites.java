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
    private final SymbolTable syms;
    private final byte[] file;
    private final KernelProbeRules rules;
    private final ProbeDecoder decoder;
    private final SymbolResolver resolver;

    public KernelProbeSites(Arch arch, SymbolTable syms, byte[] file) {
        this.syms = syms;
        this.file = file;
        this.rules = new KernelProbeRules(arch, syms, KernelTextTables.read(arch, syms, file));
        this.decoder = ProbeDecoder.open(arch);
        this.resolver = SymbolResolver.of(syms);
    }

    private boolean notraceBySymbol;

    /**
     * The kernel whose messages to print: from 6.10 trace_kprobe names a refused notrace function
     * with {@code %ps} of the probed address (recorded: {@code _stext} for 0xffffffff81000000 on
     * 6.12), before that with the probe's symbol ({@code unknown} for an address).
     */
    public KernelProbeSites dialect(Dialect d) {
        this.notraceBySymbol = d.hasBtfArgs();
        return this;
    }

    /** The kernel's address rules, for the engine that registers these probes on the running kernel. */
    public KernelProbeRules rules() { return rules; }

    @Override
    public Answer check(TraceProbe probe) {
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
        int from = (int) off.getAsLong();
        int n = Math.max(0, Math.min(len, file.length - from));
        System.arraycopy(file, from, out, 0, n);
        return n == len ? out : Arrays.copyOf(out, len);
    }

    @Override
    public void close() { decoder.close(); }
}
