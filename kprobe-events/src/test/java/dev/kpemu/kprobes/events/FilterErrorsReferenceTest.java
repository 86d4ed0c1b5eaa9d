package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.kpemu.kprobes.events.filter.EventFilter;
import dev.kpemu.kprobes.events.filter.FilterParseException;
import dev.kpemu.kprobes.events.hist.HistTrigger;
import dev.kpemu.kprobes.events.hist.HistTriggerException;
import dev.kpemu.machine.Arch;

/**
 * Bad filters and hist triggers: Linux under QEMU (Debian 12's 6.1, 13's 6.12, unstable's 7.2)
 * refused each write of {@code guest-images/reference/filters.ARCH.setup} listed in
 * {@code guest-images/reference/ARCH/SERIES/filters.filter-errors} (recorded by record-filters.sh:
 * the file read back after the refused write and the error_log entry it made). kpemu, speaking
 * that kernel's dialect ({@link Dialect#filters}), must refuse
 * each: a filter with the same filter-file text (the filter, the caret at the same column, the
 * same parse_error) and the same error_log entry; a trigger with the same error_log entry, or
 * none when Linux logged none. Every other filter and trigger of the setup Linux accepted, and so
 * must kpemu.
 */
class FilterErrorsReferenceTest {
    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"X86_64, 6.1", "ARM64, 6.1", "X86_64, 6.12", "ARM64, 6.12", "X86_64, 7.2", "ARM64, 7.2"})
    void everyRefusedWriteGivesLinuxOwnAnswer(Arch a, String series) throws Exception {
        Path ref = RecordedReferenceTest.reference();
        Assumptions.assumeTrue(ref != null, "no recorded reference in this checkout");
        Dialect dialect = Dialect.forRelease(series);
        Path errors = ref.resolve(a.linuxName()).resolve(series).resolve("filters.filter-errors");
        Assumptions.assumeTrue(Files.isRegularFile(errors), "not recorded: " + errors);
        RecordedSetupErrors recorded = RecordedSetupErrors.read(errors);
        int filters = 0, triggers = 0;
        for (RecordedSetupErrors.Refusal r : recorded.refusals()) {
            TraceProbe def = definition(ref, a, r.event());
            if (r.kind().equals("filter")) {
                filters++;
                try {
                    EventFilter.parse(r.text(), EventFields.of(def), dialect.filters());
                    fail("kpemu accepts the filter Linux refused: " + r.text());
                } catch (FilterParseException e) {
                    assertEquals(r.fileText(), e.filterFileText(), "filter file after '" + r.text() + "'");
                    assertEquals(r.errorLog(), e.errorLog(), "error_log after '" + r.text() + "'");
                }
            } else if (r.kind().equals("trigger")) {
                triggers++;
                try {
                    HistTrigger.parse(r.text(), EventFields.of(def), KernelSymbols.permissive(), dialect);
                    fail("kpemu accepts the trigger Linux refused: " + r.text());
                } catch (HistTriggerException e) {
                    assertEquals(r.errorLog(), e.errorLog(def.group(), def.event()), "error_log after '" + r.text() + "'");
                }
            }
        }
        assertTrue(filters >= 10 && triggers >= 4, "recorded refusals: " + filters + " filters, " + triggers + " triggers");
        int accepted = 0;
        for (String line : Files.readAllLines(ref.resolve("filters." + a.linuxName() + ".setup"))) {
            String[] fv = line.split("\t", 2);
            if (line.startsWith("#") || fv.length < 2 || recorded.refused(fv[0], fv[1])) continue;
            String[] path = fv[0].split("/");
            TraceProbe def = definition(ref, a, path[1] + "/" + path[2]);
            if (path[3].equals("filter")) EventFilter.parse(fv[1], EventFields.of(def), dialect.filters());
            else if (path[3].equals("trigger")) HistTrigger.parse(fv[1], EventFields.of(def), KernelSymbols.permissive(), dialect);
            else continue;
            accepted++;
        }
        assertTrue(accepted >= 10, "filters and triggers Linux accepted: " + accepted);
    }

    static TraceProbe definition(Path ref, Arch a, String event) throws Exception {
        ProbeParser parser = new ProbeParser(a);
        for (ProbeDefinition d : parser.parseAll(Files.readString(ref.resolve("filters." + a.linuxName() + ".events"))))
            if (d instanceof TraceProbe p && (p.group() + "/" + p.event()).equals(event)) return p;
        throw new AssertionError("no " + event + " in filters." + a.linuxName() + ".events");
    }
}
