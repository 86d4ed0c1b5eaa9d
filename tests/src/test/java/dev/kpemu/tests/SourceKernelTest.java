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
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.session.TracedBoot;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.KallsymsReferenceTest;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceComparator;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * Kernels built from source on this machine, as kernel developers build them:
 * {@code guest-images/build-kernel.sh ARCH} (Debian's newest linux-source of the machine's suite,
 * tinyconfig plus what kpemu and probes need). Each boots kpemu's busybox workload to power-off;
 * kpemu's symbols equal the guest's own {@code /proc/kallsyms}; and probe scripts trace exactly what
 * Linux's own kprobe_events prints for the same kernel under QEMU. Nobody recorded this kernel
 * before, so Linux's answers are recorded here, at test time, by the same scripts that record the
 * Debian references ({@code record-kallsyms.sh --out}, {@code record-reference.sh --kernel FILE
 * --out}), into {@code target/source-kernel/}. Run with {@code ./kpemu test-source-kernels}.
 */
@Tag("source-kernel")
class SourceKernelTest {
    static final Path ROOT = NativeLibraries.repositoryRoot();
    static final Path WORK = Path.of(System.getProperty("user.dir")).resolve("target/source-kernel");
    static final List<String> SCRIPTS = List.of("open", "kretprobes", "fidelity", "args");   // args: $comm (a UP kernel's current)

    /** A built kernel: the image kpemu and QEMU boot, its unstripped vmlinux, its release. */
    record Built(Path image, Path vmlinux, String release) {}

    private static final Map<Arch, Built> BUILT = new EnumMap<>(Arch.class);

    static Stream<Arguments> scripts() {
        return Stream.of(Arch.values()).flatMap(a -> SCRIPTS.stream().map(n -> Arguments.of(a, n)));
    }

    /** Builds (or finds in the cache) the kernel of {@code arch}; skips only when the build tools cannot be installed. */
    static synchronized Built built(Arch arch) throws Exception {
        Built b = BUILT.get(arch);
        if (b != null) return b;
        Files.createDirectories(WORK);
        Path log = WORK.resolve("build-" + arch.linuxName() + ".log");
        Run r = run(List.of("bash", ROOT.resolve("guest-images/build-kernel.sh").toString(), arch.linuxName()), log, Map.of(), 3 * 3600);
        Assumptions.assumeTrue(r.exit != 3, () -> "the kernel build tools cannot be installed: " + tail(log));
        assertEquals(0, r.exit, () -> "build-kernel.sh " + arch.linuxName() + " failed:\n" + tail(log));
        Path image = Path.of(r.stdout.strip());
        assertTrue(Files.isRegularFile(image), "build-kernel.sh printed " + image);
        Path dir = image.getParent();
        String release = null;
        for (String l : Files.readAllLines(dir.resolve("build-info"))) if (l.startsWith("release=")) release = l.substring(8);
        b = new Built(image, dir.resolve("vmlinux"), release);
        System.out.println("source kernel " + arch.linuxName() + ": " + image + " (" + release + ")");
        BUILT.put(arch, b);
        return b;
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Arch.class)
    void bootsTheWorkloadToPowerOff(Arch arch) throws Exception {
        Built k = built(arch);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, k.image(), null, null, 256, 60,
                console, new PrintStream(new ByteArrayOutputStream())));
        String log = console.toString(StandardCharsets.ISO_8859_1);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), arch + ": " + r.status() + "\n" + String.join("\n", r.lastLines()));
        assertTrue(log.contains(Initramfs.MARK_DONE), "the workload ran:\n" + log);
        assertTrue(log.contains("Linux version " + k.release() + " (kpemu@kpemu)"), "the console names the kernel that was built:\n" + log);
    }

    /**
     * Several CPUs on a kernel built from source (issue 26): the arm64 build is SMP (build-kernel.sh's
     * arm64 config), so it brings up both vCPUs and runs the workload to power-off. The x86-64 build is
     * a uniprocessor kernel on purpose (tinyconfig's {@code SMP n}, kept: it is the matrix's one
     * {@code CONFIG_SMP=n} kernel), which takes one CPU whatever the MADT lists, as on QEMU.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Arch.class)
    void bootsOnTwoCpus(Arch arch) throws Exception {
        Built k = built(arch);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, k.image(), null, null, 256, 60,
                console, new PrintStream(new ByteArrayOutputStream())).withCpus(2, dev.kpemu.machine.Schedule.DEFAULT_SEED));
        String log = console.toString(StandardCharsets.ISO_8859_1);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), arch + ": " + r.status() + "\n" + String.join("\n", r.lastLines()));
        assertTrue(log.contains(Initramfs.MARK_DONE), "the workload ran:\n" + log);
        if (arch == Arch.ARM64) assertTrue(log.contains("smp: Brought up 1 node, 2 CPUs"), "an SMP build brings up both CPUs:\n" + log);
        else assertTrue(!log.contains("smp: Brought up"), "a uniprocessor build has no secondary CPUs:\n" + log);
    }

    /** kpemu's symbols (the image's kallsyms tables, and the vmlinux's .symtab) equal /proc/kallsyms of the same kernel under QEMU. */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Arch.class)
    void symbolsEqualLinuxProcKallsyms(Arch arch) throws Exception {
        Built k = built(arch);
        Path ref = WORK.resolve("kallsyms-" + arch.linuxName() + ".txt");
        Files.deleteIfExists(ref);
        Path log = WORK.resolve("record-kallsyms-" + arch.linuxName() + ".log");
        Run r = run(List.of("bash", ROOT.resolve("guest-images/record-kallsyms.sh").toString(),
                "--out", ref.toString(), arch.linuxName(), k.image().toString()), log, Map.of(), 3600);
        assertEquals(0, r.exit, () -> "record-kallsyms.sh failed:\n" + tail(log));
        KallsymsReferenceTest.compare(k.image(), ref);     // what a boot reads: bzImage payload / raw Image
        KallsymsReferenceTest.compare(k.vmlinux(), ref);   // the unstripped vmlinux: .symtab and its kallsyms tables
    }

    @ParameterizedTest(name = "{1} on {0}")
    @MethodSource("scripts")
    void traceEqualsLinuxOwn(Arch arch, String script) throws Exception {
        assertTraceEqualsLinuxOwn(arch, script, Map.of());
    }

    /**
     * The reference machine on a busy host, made on purpose (qemu-reference.sh's
     * KPEMU_QEMU_SLOW_HOST): QEMU is stopped for 95 ms of every 100 ms while its clocks go on with
     * the host's, so the timers race ahead of its CPU, a slowdown bounded whatever else the host
     * runs. There this kernel without {@code no_timer_check} panics in check_timer() ("IO-APIC +
     * timer doesn't work!", as in CI on 2026-11-27); with the reference boots' options it reaches
     * the workload's end, and Linux's trace is still the one kpemu prints.
     */
    @org.junit.jupiter.api.Test
    void linuxUnderASlowHostTracesTheSame() throws Exception {
        assertTraceEqualsLinuxOwn(Arch.X86_64, "open", Map.of("KPEMU_QEMU_SLOW_HOST", "1"));
    }

    private static void assertTraceEqualsLinuxOwn(Arch arch, String script, Map<String, String> env) throws Exception {
        Built k = built(arch);
        String tag = env.isEmpty() ? "" : "-slow";
        Path ref = WORK.resolve(script + tag + "." + arch.linuxName() + ".trace");
        Files.deleteIfExists(ref);
        Path log = WORK.resolve("record-reference-" + script + tag + "-" + arch.linuxName() + ".log");
        Run rec = run(List.of("bash", ROOT.resolve("guest-images/record-reference.sh").toString(),
                "--kernel", k.image().toString(), "--out", ref.toString(), arch.linuxName(), script), log, env, 3600);
        assertEquals(0, rec.exit, () -> "record-reference.sh failed:\n" + tail(log));
        ReferenceTrace reference = ReferenceTrace.read(ref, arch);
        assertEquals(k.release(), reference.kernelRelease(), "Linux's trace was recorded on the built kernel");

        TracedBoot traced = new TracedBoot(reference.definitions(), null);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, k.image(), null, null, 256, 60,
                console, new PrintStream(new ByteArrayOutputStream())), traced);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + String.join("\n", r.lastLines()));
        List<String> lines = new ArrayList<>(traced.records().stream().map(TraceRecord::line).toList());
        // the very kernel Linux traced: every field must be equal, sizes and return sites included
        TraceComparator.Result cmp = TraceComparator.compare(reference, lines, TraceComparator.Mode.EXACT);
        assertTrue(cmp.matches(), arch + " " + script + ": " + cmp.report());
        assertTrue(cmp.expectedEvents() > 20, "the workload hits the probes: " + cmp.expectedEvents());
        String text = console.toString(StandardCharsets.ISO_8859_1);
        for (String bad : new String[] {"WARNING:", "ftrace failed", "ftrace bug", "text_poke", "BUG:", "Oops"}) {
            assertTrue(!text.contains(bad), "console shows '" + bad + "':\n" + text);
        }
    }

    record Run(int exit, String stdout) {}

    /**
     * Runs a guest-images script with {@code env} added: stdout captured, stderr to {@code log}. The
     * scripts call kpemu's CLI through {@code KPEMU_CLI}: this JVM's own classes, so the launcher
     * never rebuilds the tree. {@code timeoutSeconds} bounds a hang only: the scripts bound their
     * QEMU boots themselves, far above what a host five times slower needs.
     */
    static Run run(List<String> command, Path log, Map<String, String> env, long timeoutSeconds) throws IOException, InterruptedException {
        Path out = Files.createTempFile(WORK, "script", ".out");
        ProcessBuilder pb = new ProcessBuilder(command).directory(ROOT.toFile()).redirectError(log.toFile())
                .redirectOutput(out.toFile()).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        pb.environment().put("KPEMU_CLI", String.join(" ", java, "--enable-native-access=ALL-UNNAMED",
                "-Dkpemu.natives=" + System.getProperty("kpemu.natives", ""),
                "-Dkpemu.cache=" + System.getProperty("kpemu.cache", ""),
                "-Dkpemu.root=" + ROOT,
                "-cp", System.getProperty("java.class.path"), "dev.kpemu.cli.Main"));
        String cache = System.getProperty("kpemu.cache");
        if (cache != null && !cache.isEmpty()) pb.environment().put("KPEMU_CACHE", cache);
        pb.environment().putAll(env);
        Process p = pb.start();
        try {
            if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
                p.descendants().forEach(ProcessHandle::destroyForcibly);
                p.destroyForcibly();
                throw new AssertionError(command + " took more than " + timeoutSeconds + " s; see " + log);
            }
            return new Run(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8));
        } finally {
            Files.deleteIfExists(out);
        }
    }

    static String tail(Path log) {
        try {
            List<String> l = Files.readAllLines(log, StandardCharsets.ISO_8859_1);
            return String.join("\n", l.subList(Math.max(0, l.size() - 30), l.size()));
        } catch (IOException e) {
            return "(no log " + log + ")";
        }
    }
}
