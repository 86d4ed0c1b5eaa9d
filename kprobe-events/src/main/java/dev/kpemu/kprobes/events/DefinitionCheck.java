package dev.kpemu.kprobes.events;

import java.util.List;

import dev.kpemu.kprobes.Errno;
import dev.kpemu.machine.Arch;

/**
 * What writing definitions one after another to an empty {@code kprobe_events} gives, decided
 * without booting:
 * the parser's checks, the fetch programs' compilation (symbols, types), and the probe point's
 * checks against the kernel's text and tables ({@link ProbeSites}). This is {@code kpemu
 * check-events}, and the oracle that recorded kernel answers ({@link RecordedErrorLog}) are
 * replayed against.
 */
public final class DefinitionCheck {
    /** The outcome: accepted with its {@code kprobe_events} listing, or refused with the kernel's error. */
    public record Outcome(String definition, List<String> listing, ProbeSyntaxException error, List<String> console, String note) {
        public Outcome(String definition, List<String> listing, ProbeSyntaxException error, List<String> console) {
            this(definition, listing, error, console, null);
        }

        public boolean accepted() { return error == null; }
    }

    private final Arch arch;
    private final Dialect dialect;
    private final KernelSymbols symbols;
    private final ProbeSites sites;
    private final java.util.Set<String> defined = new java.util.HashSet<>();

    public DefinitionCheck(Arch arch, Dialect dialect, KernelSymbols symbols, ProbeSites sites) {
        this.arch = arch;
        this.dialect = dialect;
        this.symbols = symbols;
        this.sites = sites;
    }

    /** Checks the next definition, after the ones checked before (a delete needs its event defined earlier). */
    public Outcome check(String line) {
        try {
            ProbeDefinition d = new ProbeParser(arch, dialect, symbols).parse(line);
            if (d == null) return new Outcome(line, List.of(), null, List.of());
            if (d instanceof DeleteDef del) {
                String key = (del.group() != null ? del.group() : "kprobes") + "/" + del.event();
                if (!defined.remove(key)) throw ProbeSyntaxException.silent(line, Errno.ENOENT, "no event " + key + " to delete");
                return new Outcome(line, List.of(), null, List.of());
            }
            TraceProbe p = (TraceProbe) d;
            CompiledProbe.compile(p, arch, symbols);
            ProbeSites.Answer r = sites.check(p);
            if (r != null && !r.accepted()) return new Outcome(line, List.of(), r.error(), r.console());
            defined.add(p.group() + "/" + p.event());
            return new Outcome(line, List.of(TraceFormatter.listing(p)), null, r != null ? r.console() : List.of(), r != null ? r.note() : null);
        } catch (ProbeSyntaxException e) {
            return new Outcome(line, List.of(), e, List.of());
        }
    }
}
