package dev.kpemu.kprobes.events;

import java.util.HashSet;
import java.util.List;
import java.util.Set;

import dev.kpemu.kprobes.Errno;
import dev.kpemu.machine.Arch;

/**
 * What writing {@code uprobe_events} definitions one after another to an empty list gives,
 * decided without booting: the parser's checks against the guest's files. The oracle the
 * recorded kernel answers ({@link RecordedErrorLog}) are replayed against. Not yet: several
 * probes on one event ({@code append_trace_uprobe}'s checks) and the event-exists check.
 */
public final class UprobeDefinitionCheck {
    private final UprobeParser parser;
    private final Set<String> defined = new HashSet<>();

    public UprobeDefinitionCheck(Arch arch, Dialect dialect, GuestFiles files) {
        this.parser = new UprobeParser(arch, dialect, files);
    }

    /** Checks the next definition, after the ones checked before (a delete needs its event defined earlier). */
    public DefinitionCheck.Outcome check(String line) {
        try {
            UprobeCommand c = parser.parse(line);
            switch (c) {
                case null -> {
                    return new DefinitionCheck.Outcome(line, List.of(), null, List.of());
                }
                case UprobeCommand.Delete(DeleteDef del) -> {
                    String key = (del.group() != null ? del.group() : UprobeParser.DEFAULT_GROUP) + "/" + del.event();
                    if (!defined.remove(key)) throw ProbeSyntaxException.silent(line, Errno.ENOENT, "no event " + key + " to delete");
                    return new DefinitionCheck.Outcome(line, List.of(), null, List.of());
                }
                case UprobeDef p -> {
                    defined.add(p.group() + "/" + p.event());
                    return new DefinitionCheck.Outcome(line, List.of(p.listing()), null, List.of());
                }
            }
        } catch (ProbeSyntaxException e) {
            return new DefinitionCheck.Outcome(line, List.of(), e, List.of());
        }
    }
}
