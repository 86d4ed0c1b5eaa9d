package dev.kpemu.kprobes.events;

import java.util.ArrayList;
import java.util.List;

import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;

/**
 * The kernel functions a glob names and whether Linux lets a kprobe event on each of them
 * ({@code kpemu funcs}, as {@code perf probe --funcs} and {@code bpftrace -l} list them): every
 * match is checked as writing {@code p FUNCTION} to kprobe_events after boot would be, from the
 * kernel file (symbols, notrace functions, the blacklist, reserved sites, the instruction), and a
 * refused one carries Linux's reason.
 */
public final class ProbeableFunctions {
    /** A function and why Linux refuses a probe on it (null when it takes one). */
    public record Function(String name, String refusal) {
        public boolean probeable() { return refusal == null; }
    }

    private ProbeableFunctions() {}

    /**
     * The functions matching {@code glob} ({@link ProbeGlob}'s rules: unique text symbols without a
     * {@code .} suffix), in symbol order.
     */
    public static List<Function> list(Arch arch, SymbolTable syms, KernelSymbols symbols, ProbeSites sites, String glob) {
        List<ProbeGlob.Symbol> all = new ArrayList<>(syms.symbols().size());
        for (var s : syms.symbols()) all.add(new ProbeGlob.Symbol(s.name(), s.type() == 't' || s.type() == 'T' || s.type() == 'W' || s.type() == 'w'));
        List<String> matched = ProbeGlob.expand("p " + glob, all).matched();   // a plain name matches itself
        ProbeParser parser = new ProbeParser(arch, Dialect.LINUX_6_1, symbols);
        List<Function> out = new ArrayList<>(matched.size());
        for (String name : matched) {
            String refusal = null;
            try {
                TraceProbe p = (TraceProbe) parser.parse("p " + name);
                ProbeSites.Answer a = sites.check(p);
                if (a != null && !a.accepted()) refusal = reason(a.error(), a.console());
            } catch (ProbeSyntaxException e) {
                refusal = reason(e, List.of());
            }
            out.add(new Function(name, refusal));
        }
        return out;
    }

    /** Linux's reason in a few words: its console message without the symbol, else its error_log message, else the errno. */
    public static String reason(ProbeSyntaxException e, List<String> console) {
        if (!console.isEmpty()) {
            String c = console.getFirst().replaceFirst("^trace_kprobe: ", "");
            return c.replaceAll(" [^ ]+$", "").strip(); // drop the symbol: "Could not probe notrace function"
        }
        if (e.logged()) return e.errorLog().lines().findFirst().orElse("error").replaceFirst("^trace_kprobe: error: ", "");
        return "errno " + e.errno();
    }
}
