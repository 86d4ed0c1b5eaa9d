package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.cli.CorpusGuest;
import dev.kpemu.session.TracedBoot;
import dev.kpemu.image.GuestImages;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceComparator;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;

/**
 * The differential corpus of issue 11 on every kernel of the matrix (Debian 12's 6.1, 13's 6.12,
 * unstable's 7.x; both arches): hundreds of generated definitions per kernel
 * ({@code guest-images/reference/ARCH/SERIES/corpus.events}, {@code dev.kpemu.cli.CorpusGenerator},
 * from that kernel's own survey, BTF and dialect) over more than a hundred functions the workload
 * runs; Linux's own trace of them was recorded under QEMU on the same kernel and the same guest
 * ({@code guest-images/record-corpus.sh --kernel debian:SUITE ARCH}). kpemu boots
 * that guest ({@link CorpusGuest}, mode kpemu: nothing written to tracefs) with the definitions
 * registered before /init, and its trace of the workload's window must equal Linux's, event by
 * event, every argument.
 */
@Tag("kernel")
class CorpusTraceTest {
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("dev.kpemu.tests.KernelMatrixTest#kernels")
    void corpusTraceEqualsLinuxOwn(String suite, Arch arch) throws Exception {
        GuestImages images = GuestImages.forRepository();
        Path kernel = KernelMatrixTest.kernel(suite, arch);
        Map<String, String> v = KernelMatrixTest.version(suite, arch);
        ReferenceTrace reference = ReferenceTrace.read(KernelTraceRegressionTest.REFERENCE, arch, "corpus", v.get("release"));
        List<String> defs = reference.definitions();
        Set<String> functions = new HashSet<>();
        for (String d : defs) functions.add(d.split("\\s+")[1].replaceAll("[+%].*$", ""));
        assertTrue(defs.size() >= 500 && functions.size() >= 100, defs.size() + " definitions over " + functions.size() + " functions");

        Path initrd = Files.createTempFile("kpemu-corpus", ".cpio");
        try {
            CorpusGuest.archive(Files.readAllBytes(images.busybox(arch)), "kpemu", List.of()).write(initrd);
            TracedBoot traced = new TracedBoot(defs, null).armAtInit(true);
            ByteArrayOutputStream console = new ByteArrayOutputStream();
            BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, kernel, initrd, null, 256, 120,
                    console, new PrintStream(new ByteArrayOutputStream())), traced);
            assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + String.join("\n", r.lastLines()));

            List<ReferenceTrace.Event> expected = CorpusGuest.window(reference.events());
            List<String> kpemuLines = traced.records().stream().map(TraceRecord::line).toList();
            List<ReferenceTrace.Event> actual = CorpusGuest.window(reference.eventsOf(kpemuLines));
            // kpemu's whole trace, for reading next to Linux's when they differ
            Files.createDirectories(Path.of("target"));
            Files.write(Path.of("target", "corpus-" + v.get("release") + ".kpemu.trace"), kpemuLines);
            assertTrue(expected.size() > 1000, "Linux's window holds the workload: " + expected.size() + " events");
            assertTrue(!actual.isEmpty(), "kpemu's trace has the workload's window");
            TraceComparator.Result cmp = TraceComparator.compareEvents(expected, actual, TraceComparator.mode(reference, v.get("release"), v.get("version")));
            int lines = Math.min(expected.size(), actual.size());
            long args = expected.stream().mapToLong(e -> e.args().size()).sum();
            Set<Integer> bad = new HashSet<>();
            cmp.mismatches().forEach(m -> bad.add(m.index()));
            System.out.printf("corpus %s %s: %d definitions over %d functions; %d events compared (%d arguments), %d equal (%.1f %%), reference %d, kpemu %d%n",
                    v.get("release"), arch.linuxName(), defs.size(), functions.size(), lines, args, lines - bad.size(), 100.0 * (lines - bad.size()) / Math.max(1, expected.size()),
                    expected.size(), actual.size());
            assertTrue(cmp.matches(), v.get("release") + " corpus: " + cmp.report(40));
            String log = console.toString(StandardCharsets.ISO_8859_1);
            for (String badText : new String[] {"WARNING:", "ftrace failed", "BUG:", "Oops"}) {
                assertTrue(!log.contains(badText), "console shows '" + badText + "':\n" + log);
            }
        } finally {
            Files.deleteIfExists(initrd);
        }
    }
}
