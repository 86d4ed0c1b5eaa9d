package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.cli.CorpusGuest;
import dev.kpemu.session.TracedBoot;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.kprobes.Errno;
import dev.kpemu.kprobes.events.DefinitionCheck;
import dev.kpemu.kprobes.events.Dialect;
import dev.kpemu.kprobes.events.KallsymsSymbols;
import dev.kpemu.kprobes.events.KernelProbeSites;
import dev.kpemu.kprobes.events.RecordedErrorLog;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceComparator;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;

/**
 * fprobe events ({@code f:} entry, {@code f:…%return} exit) and tracepoint probes ({@code t:}),
 * issue 15, against Linux's own, on each kernel of the matrix. {@code guest-images/record-filters.sh
 * ARCH fprobes|tprobes} recorded, under QEMU on the suite's recorded build, the corpus guest
 * ({@link CorpusGuest}) whose /init writes {@code reference/NAME.ARCH.events} to
 * {@code dynamic_events} and runs the default workload:
 * Linux 6.12 (x86_64; Debian's arm64 6.12 is built without CONFIG_FPROBE_EVENTS) and 7.2 (both
 * arches). kpemu boots the same guest with the same definitions registered before /init, and the
 * workload's window must equal Linux's event by event: the entry's ip (the function's ftrace site,
 * {@code vfs_read+0x4} after x86's {@code endbr64}), the exit's return site and function, every
 * argument (BTF names, members, {@code $retval}, a return probe's {@code $argN}), an fprobe on an
 * ftrace glob ({@code vfs_rea*}) firing on each function it matches; a tracepoint
 * probe's ip is its tracepoint's probestub ({@code __probestub_sched_process_exec+0x4}), its
 * arguments the tracepoint's own ({@code bprm->filename}, {@code child->pid}). On the kernels
 * without fprobe events (6.1, arm64's 6.12) the definitions are refused as Linux refused them
 * ({@code fprobe.error_log}: EINVAL, nothing logged).
 */
@Tag("kernel")
class FprobeTraceTest {
    /** Each script's events, which Linux's window holds. */
    static final Map<String, List<String>> SCRIPTS = Map.of(
            "fprobes", List.of("fo", "fr", "frd", "fvr", "fcl", "fg", "fgr"),
            "tprobes", List.of("tex", "tfork", "sched_process_exit", "tex2"));

    static java.util.stream.Stream<org.junit.jupiter.params.provider.Arguments> kernels() {
        return KernelMatrixTest.kernels().flatMap(k -> SCRIPTS.keySet().stream().sorted()
                .map(n -> org.junit.jupiter.params.provider.Arguments.of(k.get()[0], k.get()[1], n)));
    }

    @ParameterizedTest(name = "{2} on {0} {1}")
    @MethodSource("kernels")
    void traceEqualsLinuxOwn(String suite, Arch arch, String name) throws Exception {
        GuestImages images = GuestImages.forRepository();
        Map<String, String> v = KernelMatrixTest.version(suite, arch);
        Path ref = KernelTraceRegressionTest.REFERENCE;
        Path dir = ref.resolve(arch.linuxName()).resolve(ReferenceTrace.series(v.get("release")));
        // a kernel series' own script when it needs one (6.12 takes one tracepoint probe per tracepoint)
        Path scriptFile = Files.isRegularFile(dir.resolve(name + ".events")) ? dir.resolve(name + ".events")
                : ref.resolve(name + "." + arch.linuxName() + ".events");
        List<String> script = Files.readAllLines(scriptFile).stream()
                .filter(l -> !l.isBlank() && !l.startsWith("#")).toList();
        Path kernel = KernelMatrixTest.kernel(suite, arch);
        if (!Files.isRegularFile(dir.resolve(name + ".trace"))) {
            refusedAsLinuxRefusedThem(arch, kernel, v.get("release"), dir, script);
            return;
        }
        ReferenceTrace reference = ReferenceTrace.read(ref, arch, name, v.get("release"));
        assertEquals(script, reference.definitions(), "the recorded trace is of the current script");
        Path initrd = Files.createTempFile("kpemu-" + name, ".cpio");
        try {
            CorpusGuest.archive(Files.readAllBytes(images.busybox(arch)), "kpemu", List.of()).write(initrd);
            TracedBoot traced = new TracedBoot(reference.definitions(), null).armAtInit(true);
            BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, kernel, initrd, null, 256, 120,
                    new ByteArrayOutputStream(), new PrintStream(new ByteArrayOutputStream())), traced);
            assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + String.join("\n", r.lastLines()));
            assertNull(traced.rejectedAtRegistration(), () -> "the kernel refused a definition: " + traced.rejectedAtRegistration());

            List<ReferenceTrace.Event> expected = byTask(CorpusGuest.window(reference.events()));
            List<ReferenceTrace.Event> actual = byTask(CorpusGuest.window(reference.eventsOf(traced.records().stream().map(TraceRecord::line).toList())));
            for (String e : SCRIPTS.get(name))
                if (script.stream().anyMatch(d -> d.startsWith("f:" + e + " ") || d.startsWith("t:" + e + " ") || d.equals("t " + e)))
                    assertTrue(expected.stream().anyMatch(x -> x.name().equals(e)), "Linux's window holds " + e + " events");
            TraceComparator.Result cmp = TraceComparator.compareEvents(expected, actual, TraceComparator.mode(reference, v.get("release"), v.get("version")));
            assertTrue(cmp.matches(), suite + " " + arch.linuxName() + " " + name + ": " + cmp.report(20));
        } finally {
            Files.deleteIfExists(initrd);
        }
    }

    /**
     * A tracepoint whose registration runs a {@code regfunc} (the syscall tracepoints: it flags
     * every task, without which the tracepoint never fires) is refused at registration as kpemu's
     * limit (EOPNOTSUPP, nothing logged, the reason in the message), not traced silently empty.
     */
    @org.junit.jupiter.api.Test
    void tracepointWithRegfuncIsRefusedNotSilent() throws Exception {
        TracedBoot traced = new TracedBoot(List.of("t:ts sys_enter id"), null).armAtInit(true);
        BootRunner.boot(new BootRunner.Options(Arch.X86_64, KernelMatrixTest.kernel("sid", Arch.X86_64), null, null, 256, 60,
                new ByteArrayOutputStream(), new PrintStream(new ByteArrayOutputStream())), traced);
        var e = traced.rejectedAtRegistration();
        assertTrue(e != null && e.errno() == Errno.EOPNOTSUPP && !e.logged() && e.getMessage().contains("syscall_regfunc"),
                () -> "refused as kpemu's limit: " + e);
        assertTrue(traced.records().isEmpty(), "no event");
    }

    /**
     * The events of each task in their order, task after task (by pid): when a pipe's reader runs
     * against its writer's exit is the machines' timing (QEMU's TCG against kpemu's instruction
     * clock; recorded: Linux's shell read {@code cat}'s output before {@code cat}'s exit closed its
     * files, kpemu's after), what each task did and in which order is the kernel's.
     */
    static List<ReferenceTrace.Event> byTask(List<ReferenceTrace.Event> events) {
        return events.stream().sorted(java.util.Comparator.comparingInt(e -> e.context() == null ? -1 : e.context().pid())).toList();
    }

    /** A kernel without fprobe events: each f: and t: definition is refused with Linux's recorded answer to an f: write. */
    static void refusedAsLinuxRefusedThem(Arch arch, Path kernelFile, String release, Path dir, List<String> script) throws Exception {
        RecordedErrorLog recorded = RecordedErrorLog.read(dir.resolve("fprobe.error_log"));
        assertEquals(release, recorded.kernel(), "fprobe.error_log is of the tested build");
        RecordedErrorLog.Answer linux = recorded.answers().stream().filter(a -> a.definition().equals("f:fo vfs_read")).findFirst().orElseThrow();
        assertFalse(linux.accepted(), release + ": Linux refused f:");
        assertEquals(Errno.EINVAL, linux.errno());
        assertTrue(linux.errorLog().isEmpty(), "Linux logged nothing");
        Kallsyms.KernelText k = Kallsyms.load(kernelFile);
        Dialect dialect = Dialect.forRelease(release);
        KallsymsSymbols symbols = KallsymsSymbols.forKernel(k.symbols(), arch, k.bytes());
        try (KernelProbeSites sites = new KernelProbeSites(arch, k.symbols(), k.bytes()).dialect(dialect)) {
            for (String d : script) {
                if (!d.startsWith("f") && !d.startsWith("t")) continue;
                DefinitionCheck.Outcome got = new DefinitionCheck(arch, dialect, symbols, sites).check(d);
                assertFalse(got.accepted(), release + " refuses " + d);
                assertEquals(linux.errno(), got.error().errno(), d);
                assertFalse(got.error().logged(), d + ": nothing logged, as Linux");
            }
        }
    }
}
