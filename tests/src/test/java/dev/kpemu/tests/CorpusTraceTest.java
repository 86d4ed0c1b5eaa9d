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
    /** The symbol a kretprobe puts in place of a return address (rethook from 6.2, kretprobe before). */
    static final java.util.regex.Pattern RETURN_TRAMPOLINE = java.util.regex.Pattern.compile("^(arch_rethook_trampoline|__kretprobe_trampoline|kretprobe_trampoline)\\+0x0/");

    /*
     * vm_fault.flags at a vDSO data (vvar) page fault depends on the process's random layout.
     * FAULT_FLAG_ORIG_PTE_VALID (bit 11) is set when the page table for the faulting address already
     * exists (handle_pte_fault). A forked shell child first faults the vDSO text, which makes that
     * table, then the vvar page just below it, so the bit is set, unless the vvar pages and the text
     * sit on two sides of a 2 MiB boundary (two page tables), which depends on where the mmap base
     * was randomized: about 6 chances in 512. Seen on 7.2 x86-64 once CX16 changed kpemu's guest
     * timing (and with it the entropy): 0x7f4e2cbfb000, text at 0x7f4e2cc01000. So the corpus run
     * also registers an observer at the same probe point (one probe in kpemu, as in Linux: it moves
     * nothing) reading the faulting address, and accepts a difference in an argument that reads
     * vm_fault.flags (+40 of the third argument) only where that address shows the crossing.
     */
    static final String VVAR_FAULT = "vvar_fault", VVAR_OBSERVER_NAME = "kpemu_vvar_at";
    static final String VVAR_OBSERVER = "p:" + VVAR_OBSERVER_NAME + " " + VVAR_FAULT + " addr=+24($arg3):x64";
    /** The vvar area's pages before the vDSO text, at most (7.2 x86-64: 6). */
    static final long VVAR_SPAN = 8 * 4096;

    static boolean vvarCrossesPteTables(TraceComparator.Mismatch m, ReferenceTrace.Event linux, ReferenceTrace.Event kpemu,
            List<String> defs, List<String> kpemuLines) {
        if (!m.field().startsWith("argument ") || !linux.probePoint().startsWith(VVAR_FAULT + "+") || kpemu.context() == null) return false;
        String argument = m.field().substring("argument ".length());
        boolean readsFlags = defs.stream().map(d -> d.split("\\s+"))
                .filter(f -> f[0].replaceAll("^.*[:/]", "").equals(linux.name()))
                .flatMap(f -> java.util.Arrays.stream(f).skip(2))
                .anyMatch(a -> a.startsWith(argument + "=") && a.contains("+40($arg3)"));
        if (!readsFlags) return false;
        // the observer's record at the same hit: same task and timestamp as kpemu's event
        String stamp = String.format("%d.%06d:", kpemu.context().timestampNanos() / 1_000_000_000L, kpemu.context().timestampNanos() / 1000 % 1_000_000);
        for (String l : kpemuLines) {
            if (!l.contains(" " + VVAR_OBSERVER_NAME + ": ") || !l.contains(stamp) || !l.contains(kpemu.context().comm() + "-" + kpemu.context().pid() + " ")) continue;
            long page = Long.parseUnsignedLong(l.replaceAll("^.* addr=0x([0-9a-f]+).*$", "$1"), 16) & ~0xfffL;
            return (page >>> 21) != ((page + VVAR_SPAN) >>> 21);
        }
        return false;
    }

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
            // Linux's init wrote and enabled the definitions well over OPTIMIZE_DELAY before the
            // workload ran, so every site its optimizer accepts is already a jump in Linux's window
            // (no site there goes from int3 to jump). kpemu registers at run_init_process, right
            // before the workload: with no delay the jumps are written at the first return to user
            // mode, as Linux's are by then.
            List<String> registered = new java.util.ArrayList<>(defs);
            boolean vvar = defs.stream().anyMatch(d -> d.split("\\s+")[1].equals(VVAR_FAULT));
            if (vvar) registered.add(VVAR_OBSERVER);
            TracedBoot traced = new TracedBoot(registered, null).armAtInit(true).optimizeDelay(java.time.Duration.ZERO);
            ByteArrayOutputStream console = new ByteArrayOutputStream();
            BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, kernel, initrd, null, 256, 120,
                    console, new PrintStream(new ByteArrayOutputStream())), traced);
            assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + String.join("\n", r.lastLines()));

            List<ReferenceTrace.Event> expected = CorpusGuest.window(reference.events());
            List<String> allLines = traced.records().stream().map(TraceRecord::line).toList();
            List<String> kpemuLines = allLines.stream().filter(l -> !l.contains(" " + VVAR_OBSERVER_NAME + ": ")).toList();
            List<ReferenceTrace.Event> actual = CorpusGuest.window(reference.eventsOf(kpemuLines));
            // kpemu's whole trace, for reading next to Linux's when they differ
            Files.createDirectories(Path.of("target"));
            Files.write(Path.of("target", "corpus-" + v.get("release") + ".kpemu.trace"), kpemuLines);
            assertTrue(expected.size() > 1000, "Linux's window holds the workload: " + expected.size() + " events");
            assertTrue(!actual.isEmpty(), "kpemu's trace has the workload's window");
            // The latency column is compared in full, need-resched aside (TraceComparator.Context.LINUX).
            TraceComparator.Result cmp = TraceComparator.compareEvents(expected, actual, TraceComparator.mode(reference, v.get("release"), v.get("version")), TraceComparator.Context.LINUX);
            int lines = Math.min(expected.size(), actual.size());
            long args = expected.stream().mapToLong(e -> e.args().size()).sum();
            Set<Integer> bad = new HashSet<>();
            cmp.mismatches().forEach(m -> bad.add(m.index()));
            System.out.printf("corpus %s %s: %d definitions over %d functions; %d events compared (%d arguments), %d equal (%.1f %%), reference %d, kpemu %d%n",
                    v.get("release"), arch.linuxName(), defs.size(), functions.size(), lines, args, lines - bad.size(), 100.0 * (lines - bad.size()) / Math.max(1, expected.size()),
                    expected.size(), actual.size());
            // A return probe out of instances (maxactive: 10 on one CPU) leaves the real return address
            // where Linux's +0($stack) showed the trampoline. An exited task gives its instances back only
            // when the task is freed after an RCU grace period (rethook_flush_task from
            // delayed_put_task_struct), and kpemu's guest runs the workload faster in guest time than
            // QEMU's (its commands about 1 ms apart against Linux's 8), so more exits wait at once and a
            // return probe on exit_group can run out where Linux's did not. Such an argument is accepted
            // only for a function whose return probe kpemu's kprobe_profile shows missed, printed once.
            Set<String> missedReturns = new HashSet<>();
            for (String d : defs) {
                if (!d.startsWith("r")) continue;
                String[] f = d.split("\\s+");
                String event = f[0].substring(f[0].indexOf(':') + 1).replaceAll("^.*/", "");
                if (traced.events().misses(event) > 0) missedReturns.add(f[1].replaceAll("[+%].*$", ""));
            }
            List<TraceComparator.Mismatch> outOfInstances = cmp.mismatches().stream()
                    .filter(m -> m.field().startsWith("argument") && RETURN_TRAMPOLINE.matcher(m.expected()).find()
                            && !RETURN_TRAMPOLINE.matcher(m.actual()).find()
                            && missedReturns.contains(expected.get(m.index()).probePoint().replaceAll("\\+0x.*$", ""))).toList();
            if (!outOfInstances.isEmpty()) {
                System.out.printf("corpus %s %s: %d arguments show the return address where Linux's show the trampoline; kpemu's return probe on %s missed%n",
                        v.get("release"), arch.linuxName(), outOfInstances.size(), missedReturns);
            }
            List<TraceComparator.Mismatch> pteTable = cmp.mismatches().stream()
                    .filter(m -> !outOfInstances.contains(m) && vvarCrossesPteTables(m, expected.get(m.index()), actual.get(m.index()), defs, allLines)).toList();
            if (!pteTable.isEmpty()) {
                System.out.printf("corpus %s %s: %d arguments read vm_fault.flags at a vvar fault whose vvar and vDSO text pages are in two page tables in kpemu's layout%n",
                        v.get("release"), arch.linuxName(), pteTable.size());
            }
            List<TraceComparator.Mismatch> other = cmp.mismatches().stream().filter(m -> !outOfInstances.contains(m) && !pteTable.contains(m)).toList();
            assertTrue(other.isEmpty(), v.get("release") + " corpus: " + cmp.report(40));
            String log = console.toString(StandardCharsets.ISO_8859_1);
            for (String badText : new String[] {"WARNING:", "ftrace failed", "BUG:", "Oops"}) {
                assertTrue(!log.contains(badText), "console shows '" + badText + "':\n" + log);
            }
        } finally {
            Files.deleteIfExists(initrd);
        }
    }
}
