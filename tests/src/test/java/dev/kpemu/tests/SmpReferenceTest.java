package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.boot.Arm64LinuxLoader;
import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.HostFiles;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.RecordedKernels;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Schedule;
import dev.kpemu.session.TracedBoot;

/**
 * kprobes on several CPUs against Linux's own (issue 26): the "smp" script
 * ({@code guest-images/reference/smp.init}: one task pinned to each CPU, each reading
 * {@code /proc/version} 50 times, all at once) with a kprobe at {@code version_proc_show}'s entry,
 * one inside it and a kretprobe, booted by kpemu with N vCPUs and compared with the trace and
 * {@code kprobe_profile} Linux recorded under QEMU {@code -smp N}
 * ({@code guest-images/record-smp.sh ARCH N}) on the same kernel and initramfs: Debian 12's 6.1,
 * 13's 6.12 and unstable's 7.2, both arches.
 *
 * <p>What must be equal: per CPU, the sequence of events (task name, latency flags but need-resched,
 * which follows the host's timing under QEMU, event, probe text); per task, the same sequence and the CPU it ran on (pids themselves are not compared: kernel
 * threads on the other CPUs take pids at times the host's speed decides); every event's hits and
 * misses in {@code kprobe_profile}. Not compared: the interleaving across CPUs, timestamps.
 */
@Tag("kernel")
@Tag("smp")
class SmpReferenceTest {
    static final Path REFERENCE = KernelTraceRegressionTest.REFERENCE;
    /** TASK-PID [CPU] FLAGS [TIMESTAMP:] EVENT: TEXT, as the trace file prints a line. */
    static final Pattern LINE = Pattern.compile("^\\s*(.+)-(\\d+)\\s+\\[(\\d{3})\\]\\s+(\\S+)\\s+(?:\\d+\\.\\d+:\\s+)?(\\S+: .*)$");

    record Event(String task, int pid, int cpu, String flags, String text) {
        /** The task, the latency column without need-resched (its second character: timing, as TraceComparator) and the event. */
        String compared() {
            String f = flags.length() > 1 ? flags.charAt(0) + "_" + flags.substring(2) : flags;
            return task + " " + f + " " + text;
        }
    }

    /** Each kernel of the matrix (Debian 12, 13, unstable) × arch × 2 and 4 CPUs. */
    static java.util.stream.Stream<org.junit.jupiter.params.provider.Arguments> cases() {
        return KernelMatrixTest.kernels().flatMap(k -> java.util.stream.Stream.of(2, 4)
                .map(n -> org.junit.jupiter.params.provider.Arguments.of(k.get()[0], k.get()[1], n)));
    }

    @ParameterizedTest(name = "{0} {1} cpus={2}")
    @MethodSource("cases")
    void pinnedTasksOnEveryCpuTraceAsLinuxDoes(String suite, Arch arch, int cpus, @TempDir Path tmp) throws Exception {
        GuestImages images = GuestImages.forRepository();
        KernelChoice.Debian kernel = RecordedKernels.choice(suite);
        String series = ReferenceTrace.series(images.kernelVersion(arch, kernel).get("release"));
        Path dir = REFERENCE.resolve(arch.linuxName()).resolve(series);
        Path own = dir.resolve("smp.events");     // a series whose probe offset inside the function differs
        List<String> definitions = definitions(Files.isRegularFile(own) ? own : REFERENCE.resolve("smp." + arch.linuxName() + ".events"));
        List<Event> expected = events(Files.readAllLines(dir.resolve("smp-cpus" + cpus + ".trace")));
        Map<String, String> expectedProfile = profile(Files.readAllLines(dir.resolve("smp-cpus" + cpus + ".profile")));

        Initramfs archive = Initramfs.defaultGuest(Files.readAllBytes(images.busybox(arch)));
        HostFiles.addExecutable(archive, REFERENCE.resolve("smp.init"), "init", arch);
        Path initrd = archive.write(tmp.resolve("smp.cpio"));
        String append = (arch == Arch.X86_64 ? "console=ttyS0 nokaslr" : Arm64LinuxLoader.DEFAULT_CMDLINE) + " smp_rounds=50";

        TracedBoot traced = new TracedBoot(definitions, null);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Options o = new BootRunner.Options(arch, images.kernel(arch, kernel), initrd, append, 256, 120,
                console, new PrintStream(new ByteArrayOutputStream())).withCpus(cpus, Schedule.DEFAULT_SEED);
        if (arch == Arch.X86_64) o = o.withX86Apic(true);
        BootRunner.Result r = BootRunner.boot(o, traced);
        String log = console.toString(StandardCharsets.ISO_8859_1);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + log);
        assertTrue(log.contains("KPEMU-INIT-START cpus=" + cpus + " "), "the guest sees " + cpus + " CPUs online:\n" + log);
        assertTrue(log.contains("KPEMU-SMP-WORK-DONE"), log);

        List<Event> actual = events(traced.records().stream().map(TraceRecord::line).toList());
        assertEquals(byCpu(expected), byCpu(actual), "per CPU, the event sequences");
        assertEquals(byTask(expected), byTask(actual), "per task, its CPU and event sequence");
        assertEquals(expectedProfile, profile(List.of(traced.events().profile().split("\n"))), "kprobe_profile");
        assertEquals(cpus * 50 * 3, actual.size(), "three events per read on every CPU");
    }

    static List<String> definitions(Path file) throws IOException {
        return Files.readAllLines(file).stream().map(l -> l.replaceAll("#.*", "").strip()).filter(l -> !l.isEmpty()).toList();
    }

    static List<Event> events(List<String> lines) {
        List<Event> out = new ArrayList<>();
        for (String l : lines) {
            if (l.startsWith("#")) continue;
            Matcher m = LINE.matcher(l);
            if (!m.matches()) continue;
            out.add(new Event(m.group(1).strip(), Integer.parseInt(m.group(2)), Integer.parseInt(m.group(3)), m.group(4), m.group(5)));
        }
        return out;
    }

    /** cpu → its events in order. */
    static Map<Integer, List<String>> byCpu(List<Event> events) {
        Map<Integer, List<String>> m = new TreeMap<>();
        for (Event e : events) m.computeIfAbsent(e.cpu(), k -> new ArrayList<>()).add(e.compared());
        return m;
    }

    /** Each task as "cpu N: its events", in the order the tasks' CPUs sort (pids dropped). */
    static List<String> byTask(List<Event> events) {
        Map<Integer, List<Event>> m = new LinkedHashMap<>();
        for (Event e : events) m.computeIfAbsent(e.pid(), k -> new ArrayList<>()).add(e);
        List<String> out = new ArrayList<>();
        for (List<Event> task : m.values()) {
            StringBuilder b = new StringBuilder("cpus " + task.stream().map(Event::cpu).distinct().sorted().toList() + ":");
            for (Event e : task) b.append('\n').append(e.compared());
            out.add(b.toString());
        }
        out.sort(null);
        return out;
    }

    /** event → "hits misses", from kprobe_profile's lines. */
    static Map<String, String> profile(List<String> lines) {
        Map<String, String> m = new TreeMap<>();
        for (String l : lines) {
            if (l.startsWith("#") || l.isBlank()) continue;
            String[] f = l.strip().split("\\s+");
            if (f.length == 3) m.put(f[0], f[1] + " " + f[2]);
        }
        return m;
    }
}
