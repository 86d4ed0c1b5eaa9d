package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;

/**
 * The same kernel, initramfs and probe script twice gives the same run: byte-identical console
 * and trace (timestamps included) and the same instruction count, on both arches. x86 reaches
 * this because rdtsc/rdtscp read the virtual clock (Unicorn 2.1.4's instruction hooks); before,
 * the kernel's entropy read the host TSC and runs drifted by thousands of instructions.
 */
@Tag("kernel")
class DeterministicRunTest {

    static List<String> definitions(Arch arch, String script) throws IOException {
        return Files.readAllLines(ReferenceTrace.definitionsPath(KernelTraceRegressionTest.REFERENCE, arch, script)).stream()
                .map(String::strip).filter(l -> !l.isEmpty() && !l.startsWith("#")).toList();
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void sameScriptTwiceGivesTheSameTraceAndConsole(Arch arch) throws Exception {
        // the recorded 'open' and 'kretprobes' scripts: entry and return probes with strings,
        // registered where kprobe_event= registers them
        List<String> defs = new ArrayList<>(definitions(arch, "open"));
        defs.addAll(definitions(arch, "kretprobes"));
        KernelTraceRegressionTest.Run first = KernelTraceRegressionTest.boot(arch, defs);
        KernelTraceRegressionTest.Run second = KernelTraceRegressionTest.boot(arch, defs);
        for (KernelTraceRegressionTest.Run r : List.of(first, second)) {
            assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), r.result().status());
        }
        List<String> a = first.traced().records().stream().map(TraceRecord::line).toList();
        List<String> b = second.traced().records().stream().map(TraceRecord::line).toList();
        assertTrue(a.size() > 20, "the workload hits the probes: " + a.size());
        assertEquals(a, b, "trace lines, timestamps included");
        assertEquals(first.console(), second.console(), "console");
        assertEquals(first.result().instructions(), second.result().instructions(), "instructions executed");
        assertEquals(first.result().guestNanos(), second.result().guestNanos(), "guest time at power-off");
    }
}
