package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.session.TracedBoot;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;

/**
 * Issue 12: many functions probed with one glob definition ({@code p:vfs/ vfs_*}, kpemu's
 * extension) on Debian's x86 kernel: the functions Linux would refuse are skipped with one
 * summary line, and the events of the probes that fire equal — line for line, timestamps
 * included — a run that probes only those functions: the unhit probes change nothing.
 */
@Tag("kernel")
class GlobProbesTest {
    record Run(List<String> lines, List<String> messages) {}

    static Run boot(List<String> defs) throws Exception {
        List<String> messages = new ArrayList<>();
        TracedBoot traced = new TracedBoot(defs, null).kernelMessages(messages::add);
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(Arch.X86_64, null, null, null, 256, 60,
                new ByteArrayOutputStream(), new PrintStream(new ByteArrayOutputStream())), traced);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + String.join("\n", r.lastLines()));
        return new Run(traced.records().stream().map(TraceRecord::line).toList(), messages);
    }

    @Test
    void probesThatFireGiveTheSameTraceAsProbingOnlyThoseFunctions() throws Exception {
        Run all = boot(List.of("p:vfs/ vfs_*"));
        String summary = all.messages().stream().filter(m -> m.startsWith("kpemu: p:vfs/ vfs_*: ")).findFirst().orElseThrow(
                () -> new AssertionError("no summary line: " + all.messages()));
        Matcher m = Pattern.compile("kpemu: p:vfs/ vfs_\\*: (\\d+) probes, (\\d+) skipped as Linux refuses them \\((.*)\\)").matcher(summary);
        assertTrue(m.matches(), summary);
        int probes = Integer.parseInt(m.group(1));
        assertTrue(probes > 40, summary);
        // notrace vfs_ functions: Linux answers "Could not probe notrace function" for them
        assertTrue(m.group(3).contains("Could not probe notrace function"), summary);

        // the functions whose probes fired, named as Linux names a probe written without a name
        TreeMap<String, String> fired = new TreeMap<>();
        Pattern event = Pattern.compile(": (p_(vfs_\\w+)_0): \\(");
        for (String l : all.lines()) {
            Matcher e = event.matcher(l);
            assertTrue(e.find(), l);
            fired.put(e.group(1), e.group(2));
        }
        assertTrue(fired.size() >= 5 && fired.size() < probes, "some fire, some do not: " + fired.keySet());
        List<String> only = new ArrayList<>();
        fired.forEach((name, fn) -> only.add("p:vfs/" + name + " " + fn));
        Run some = boot(only);
        assertEquals(all.lines(), some.lines(), "the events of the probes that fire, timestamps included");
    }
}
