package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.kpemu.kprobes.events.hist.HistTrigger;
import dev.kpemu.machine.Arch;

/**
 * The order of a hist file's entries, as each kernel's own sort leaves equal counts: from the
 * hist files Linux printed under QEMU ({@code guest-images/reference/ARCH/SERIES/filters.hist},
 * record-filters.sh) on Debian 12's 6.1, Debian 13's 6.12 and unstable's 7.2 — 6.1's and 6.12's {@code lib/sort.c} differ —
 * the entries of myopen's {@code keys=fn,flags.hex} (sort by hitcount, mostly equal) and
 * {@code keys=dfd,flags} (two sort keys) triggers are fed to kpemu's trigger, in reverse order,
 * each as many times as its hitcount; kpemu's hist text must be Linux's, byte for byte.
 */
class HistOrderReferenceTest {
    private static final Pattern FN_FLAGS = Pattern.compile("\\{ fn: (.{50}), flags: ([0-9a-f]+) \\} hitcount: +(\\d+)");
    private static final Pattern DFD_FLAGS = Pattern.compile("\\{ dfd: +(\\d+), flags: +(\\d+) \\} hitcount: +(\\d+)");

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"X86_64, 6.1", "ARM64, 6.1", "X86_64, 6.12", "ARM64, 6.12", "X86_64, 7.2", "ARM64, 7.2"})
    void equalCountsComeOutInLinuxOrder(Arch a, String series) throws Exception {
        Path ref = RecordedReferenceTest.reference();
        Assumptions.assumeTrue(ref != null, "no recorded reference in this checkout");
        Path hist = ref.resolve(a.linuxName()).resolve(series).resolve("filters.hist");
        Assumptions.assumeTrue(Files.isRegularFile(hist), "not recorded: " + hist);
        TraceProbe def = FilterErrorsReferenceTest.definition(ref, a, "kprobes/myopen");
        List<String> sections = sections(Files.readString(hist), "events/kprobes/myopen/hist");
        int checked = 0;
        for (String line : Files.readAllLines(ref.resolve("filters." + a.linuxName() + ".setup"))) {
            if (!line.startsWith("events/kprobes/myopen/trigger\thist:keys=fn,flags.hex ")
                    && !line.startsWith("events/kprobes/myopen/trigger\thist:keys=dfd,flags:")) continue;
            String text = line.substring(line.indexOf('\t') + 1);
            String keys = text.substring(0, text.indexOf(':', 5) < 0 || text.indexOf(' ') < text.indexOf(':', 5) ? text.indexOf(' ') : text.indexOf(':', 5));
            String want = sections.stream().filter(s -> s.contains("# trigger info: " + keys + ":")).findFirst().orElseThrow();
            HistTrigger t = HistTrigger.parse(text, EventFields.of(def), KernelSymbols.permissive(), !series.equals("6.1"));
            List<TraceRecord> records = new ArrayList<>();
            Matcher m = (keys.contains("fn,") ? FN_FLAGS : DFD_FLAGS).matcher(want);
            while (m.find()) {
                long hits = Long.parseLong(m.group(3));
                for (long i = 0; i < hits; i++) {
                    records.add(keys.contains("fn,")
                            ? record(-100, m.group(1).strip(), Long.parseUnsignedLong(m.group(2), 16))
                            : record(Long.parseUnsignedLong(m.group(1)), "/", Long.parseUnsignedLong(m.group(2))));
                }
            }
            assertTrue(records.size() > 10, "entries in " + want);
            Collections.reverse(records);
            records.forEach(t::accept);
            assertEquals(want, t.show(0), a + " " + series + " " + text);
            checked++;
        }
        assertEquals(2, checked, "both triggers are in the setup");
    }

    private static TraceRecord record(long dfd, String fn, long flags) {
        return new TraceRecord("kprobes", "myopen", new TraceContext("cat", 90, 0, ".....", 0), "myopen: (x)", false, 0x1000, 0, 2000,
                List.of(new EventArg("dfd", FetchType.S32, 0, (long) (int) dfd, null), new EventArg("fn", FetchType.USTRING, 0, fn, null),
                        new EventArg("flags", FetchType.X64, 0, flags, null)));
    }

    /** The hist sections of one recorded hist file: each from "# event histogram" to its Totals. */
    static List<String> sections(String file, String name) {
        int at = file.indexOf("## hist " + name + "\n");
        int end = file.indexOf("\n## hist ", at + 1);
        String body = file.substring(at + ("## hist " + name + "\n").length(), end < 0 ? file.length() : end + 1);
        List<String> out = new ArrayList<>();
        for (String s : body.split("(?=# event histogram\n)")) {
            if (!s.startsWith("# event histogram")) continue;
            out.add(s.replaceAll("\n+$", "\n"));
        }
        return out;
    }
}
