package dev.kpemu.kprobes.events;

import java.util.List;

import dev.kpemu.kprobes.Errno;
import dev.kpemu.machine.Arch;

/**
 * What writing one definition to an empty {@code kprobe_events} gives, decided without booting:
 * the parser's checks, the fetch programs' compilation (symbols, types), and the probe point's
 * checks against the kernel's text and tables ({@link ProbeSites}). This is {@code kpemu
 * check-events}, and the oracle that recorded kernel answers ({@link RecordedErrorLog}) are
 * replayed against.
 */
public final class DefinitionCheck {
    /** The outcome: accepted with its {@code kprobe_events} listing, or refused with the kernel's error. */
    public record Outcome(String definition, List<String> listing, ProbeSyntaxException error, List<String> console) {
        public boolean accepted() { return error == null; }
    }

    private final Arch arch;
    private final Dialect dialect;
    private final KernelSymbols symbols;
    private final ProbeSites sites;

    public DefinitionCheck(Arch arch, Dialect dialect, KernelSymbols symbols, ProbeSites sites) {
        this.arch = arch;
        this.dialect = dialect;
        this.symbols = symbols;
        this.sites = sites;
    }

    /** Checks one definition as if it were the only one written to an empty kprobe_events. */
    public Outcome check(String line) {
        try {
            ProbeDefinition d = new ProbeParser(arch, dialect, symbols).parse(line);
            if (d == null) return new Outcome(line, List.of(), null, List.of());
            if (d instanceof DeleteDef del) {
                // nothing is defined yet: deleting names no event (ENOENT, nothing logged)
                throw ProbeSyntaxException.silent(line, Errno.ENOENT, "no event " + del + " to delete");
            }
            TraceProbe p = (TraceProbe) d;
            CompiledProbe.compile(p, arch, symbols);
            ProbeSites.Refusal r = sites.check(p);
            if (r != null) return new Outcome(line, List.of(), r.error(), r.console());
            return new Outcome(line, List.of(TraceFormatter.listing(p)), null, List.of());
        } catch (ProbeSyntaxException e) {
            return new Outcome(line, List.of(), e, List.of());
        }
    }
}
