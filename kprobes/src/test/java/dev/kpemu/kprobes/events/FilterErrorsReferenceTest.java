package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.kprobes.events.filter.EventFilter;
import dev.kpemu.kprobes.events.filter.FilterParseException;
import dev.kpemu.machine.Arch;

/**
 * Bad event filters: Linux 6.1 under QEMU refused each filter of
 * {@code guest-images/reference/filters.ARCH.setup} that is in
 * {@code guest-images/reference/ARCH/6.1/filters.filter-errors} (recorded by record-filters.sh:
 * the event's filter file read back after the refused write). kpemu must refuse each with the
 * same text — the filter, the caret at the same column, the same parse_error — and accept the
 * setup's other filters.
 */
class FilterErrorsReferenceTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void everyRefusedFilterGivesLinuxOwnText(Arch a) throws Exception {
        Path ref = RecordedReferenceTest.reference();
        Assumptions.assumeTrue(ref != null, "no recorded reference in this checkout");
        Path errors = ref.resolve(a.linuxName()).resolve("6.1").resolve("filters.filter-errors");
        Assumptions.assumeTrue(Files.isRegularFile(errors), "not recorded: " + errors);
        EventFields myopen = EventFields.of(definition(ref, a, "myopen"));

        List<String> blocks = blocks(Files.readAllLines(errors));
        assertTrue(blocks.size() >= 10, "recorded refusals: " + blocks.size());
        List<String> refused = new ArrayList<>();
        for (String want : blocks) {
            String filter = want.substring(0, want.indexOf('\n'));
            refused.add(filter);
            try {
                EventFilter.parse(filter, myopen);
                fail("kpemu accepts the filter Linux refused: " + filter);
            } catch (FilterParseException e) {
                assertEquals(want, e.filterFileText(), "filter '" + filter + "'");
            }
        }
        // the setup's other filters on myopen: Linux accepted them
        for (String line : Files.readAllLines(ref.resolve("filters." + a.linuxName() + ".setup"))) {
            if (!line.startsWith("events/kprobes/myopen/filter\t")) continue;
            String filter = line.substring(line.indexOf('\t') + 1);
            if (!refused.contains(filter)) EventFilter.parse(filter, myopen);
        }
    }

    static TraceProbe definition(Path ref, Arch a, String event) throws Exception {
        ProbeParser parser = new ProbeParser(a);
        for (ProbeDefinition d : parser.parseAll(Files.readString(ref.resolve("filters." + a.linuxName() + ".events"))))
            if (d instanceof TraceProbe p && p.event().equals(event)) return p;
        throw new AssertionError("no " + event + " in filters." + a.linuxName() + ".events");
    }

    /** Each "## refused FILE" block's text: the filter file as Linux showed it. */
    static List<String> blocks(List<String> lines) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = null;
        for (String l : lines) {
            if (l.startsWith("## refused ")) {
                if (cur != null) out.add(cur.toString());
                cur = new StringBuilder();
            } else if (cur != null) {
                cur.append(l).append('\n');
            }
        }
        if (cur != null) out.add(cur.toString());
        return out;
    }
}
