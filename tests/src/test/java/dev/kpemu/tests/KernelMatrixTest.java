package dev.kpemu.tests;

import dev.kpemu.image.RecordedKernels;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.cli.CorpusGuest;
import dev.kpemu.session.TracedBoot;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.KallsymsReferenceTest;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelTextTablesTest;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceComparator;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;

/**
 * Every kernel our users run, on both arches: Debian 12 (6.1), 13 (6.12) and unstable (7.x), each
 * fetched by suite. Each boots kpemu's busybox workload to power-off, and each recorded probe
 * script's trace equals what Linux itself printed for that kernel series under QEMU
 * (guest-images/reference/ARCH/SERIES, recorded by guest-images/record-reference.sh --kernel).
 */
@Tag("kernel")
class KernelMatrixTest {
    /** The suites, or the ones {@code -Dkpemu.matrix.suites=trixie,sid} names. */
    static final List<String> SUITES = List.of(System.getProperty("kpemu.matrix.suites", "bookworm,trixie,sid").split(","));
    static final List<String> SCRIPTS = List.of("open", "args", "fidelity", "kretprobes", "boottime", "fetchquirks", "exitpath", "optip", "btfargs");

    static Stream<Arguments> kernels() {
        return SUITES.stream().flatMap(s -> Stream.of(Arch.values()).map(a -> Arguments.of(s, a)));
    }

    /**
     * Each script on each kernel, for the arches it is written for (optip: x86-64 only);
     * {@code -Dkpemu.matrix.scripts=exitpath,optip} runs only those (when re-recording one).
     */
    static Stream<Arguments> scripts() {
        String only = System.getProperty("kpemu.matrix.scripts", "");
        List<String> chosen = only.isBlank() ? SCRIPTS : List.of(only.split(","));
        return kernels().flatMap(k -> chosen.stream().filter(n -> scriptFor(n, (Arch) k.get()[1]))
                .map(n -> Arguments.of(k.get()[0], k.get()[1], n)));
    }

    /** Whether the script has definitions for {@code arch}: guest-images/reference/NAME.ARCH.events. */
    static boolean scriptFor(String name, Arch arch) {
        return Files.isRegularFile(KernelTraceRegressionTest.REFERENCE.resolve(name + "." + arch.linuxName() + ".events"));
    }

    /** The build the suite's references were recorded on ({@code guest-images/reference/kernels}). */
    static Path kernel(String suite, Arch arch) throws Exception {
        return GuestImages.forRepository().kernel(arch, RecordedKernels.choice(suite));
    }

    static Map<String, String> version(String suite, Arch arch) throws Exception {
        return GuestImages.forRepository().kernelVersion(arch, RecordedKernels.choice(suite));
    }

    /**
     * The suite's newest build, the one {@code --kernel debian:SUITE} gives users today (the other
     * tests boot the build their references were recorded on, {@link RecordedKernels}).
     */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("kernels")
    void newestBuildBootsTheWorkloadToPowerOff(String suite, Arch arch) throws Exception {
        GuestImages images = GuestImages.forRepository();
        KernelChoice.Debian newest = new KernelChoice.Debian(suite);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, images.kernel(arch, newest), null, null, 256, 60,
                console, new PrintStream(new ByteArrayOutputStream())));
        String log = console.toString(StandardCharsets.ISO_8859_1);
        String release = images.kernelVersion(arch, newest).get("release");
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), suite + " " + arch + " " + release + ": " + r.status() + "\n" + String.join("\n", r.lastLines()));
        assertTrue(log.contains(Initramfs.MARK_DONE), "the workload ran");
        assertTrue(log.contains(release), "the console names the kernel that booted");
    }

    /** kpemu's symbols equal the guest's own /proc/kallsyms (recorded by guest-images/record-kallsyms.sh). */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("kernels")
    void symbolsEqualLinuxProcKallsyms(String suite, Arch arch) throws Exception {
        Path k = kernel(suite, arch);
        KallsymsReferenceTest.compare(arch == Arch.X86_64 ? GuestImages.forRepository().vmlinux(arch, RecordedKernels.choice(suite)) : k);
    }

    /** The kprobe blacklist and ftrace's sites read from the file equal what Linux lists after boot (record-kernel-lists.sh). */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("kernels")
    void kernelTablesEqualLinuxOwnLists(String suite, Arch arch) throws Exception {
        KernelTextTablesTest.blacklistEqualsDebugfs(arch, kernel(suite, arch), version(suite, arch));
        KernelTextTablesTest.ftraceSitesEqualAvailableFilterFunctions(arch, kernel(suite, arch), version(suite, arch));
    }

    /** Scripts on the exit path, compared on the workload's own tasks where their events name the task ({@code c=$comm}). */
    static final java.util.Set<String> TASK_NAMED = java.util.Set.of("exitpath", "optip");

    /** Events whose {@code c} argument ({@code $comm}) names one of the workload's own tasks. */
    static List<ReferenceTrace.Event> workloadTasks(List<ReferenceTrace.Event> events) {
        return events.stream().filter(e -> e.args().stream()
                .anyMatch(a -> a.name().equals("c") && CorpusGuest.WORKLOAD_TASKS.contains(a.value().replace("\"", "")))).toList();
    }

    @ParameterizedTest(name = "{2} on {0} {1}")
    @MethodSource("scripts")
    void traceEqualsLinuxOwn(String suite, Arch arch, String script) throws Exception {
        Map<String, String> v = version(suite, arch);
        Path ref = KernelTraceRegressionTest.REFERENCE.resolve(arch.linuxName()).resolve(ReferenceTrace.series(v.get("release"))).resolve(script + ".trace");
        Assumptions.assumeTrue(Files.isRegularFile(ref), "no " + script + " reference recorded for " + v.get("release"));
        ReferenceTrace reference = ReferenceTrace.read(KernelTraceRegressionTest.REFERENCE, arch, script, v.get("release"));
        TracedBoot traced = new TracedBoot(reference.definitions(), null);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, kernel(suite, arch), null, null, 256, 60,
                console, new PrintStream(new ByteArrayOutputStream())), traced);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + String.join("\n", r.lastLines()));
        assertTrue(traced.rejectedAtRegistration() == null, () -> "the kernel refused a definition: " + traced.rejectedAtRegistration());
        List<String> lines = new ArrayList<>(traced.records().stream().map(TraceRecord::line).toList());
        TraceComparator.Result cmp;
        if (TASK_NAMED.contains(script) && reference.definitions().stream().anyMatch(d -> d.contains(" c=$comm"))) {
            // exitpath and optip on 6.12 and later: kernel threads end at moments the machine's timing
            // decides; the events name their task and the workload's own tasks are compared
            cmp = TraceComparator.compareEvents(workloadTasks(reference.events()), workloadTasks(reference.eventsOf(lines)),
                    TraceComparator.mode(reference, v.get("release"), v.get("version")));
        } else {
            cmp = TraceComparator.compare(reference, lines, v.get("release"), v.get("version"));
        }
        assertTrue(cmp.matches(), suite + " " + arch + " " + script + ": " + cmp.report());
        assertTrue(reference.events().size() > 20 && cmp.expectedEvents() > 10, "the workload hits the probes: " + cmp.expectedEvents()
                + " events compared of " + reference.events().size());
        // the probes cause no ftrace, alternatives or text-patching complaint
        String log = console.toString(StandardCharsets.ISO_8859_1);
        for (String bad : new String[] {"WARNING:", "ftrace failed", "ftrace bug", "text_poke", "BUG:", "Oops"}) {
            assertTrue(!log.contains(bad), "console shows '" + bad + "':\n" + log);
        }
    }
}
