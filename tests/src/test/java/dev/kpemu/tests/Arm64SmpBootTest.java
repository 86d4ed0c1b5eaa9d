package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.GuestTerminal;
import dev.kpemu.image.CommandGuest;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Schedule;

/**
 * Issue 26 on arm64: Debian 12's 6.1 (the build the references were recorded on) boots on
 * N = 2, 4 and 8 virtual CPUs ({@code BootRunner.Options.withCpus}): PSCI CPU_ON brings the
 * secondaries up as under QEMU {@code virt -smp N} (its console's lines), every CPU's own timer
 * ticks, the default workload and a user command run to power-off and the guest counts N CPUs;
 * the same boot twice is the same run, other schedule seeds boot too and interleave otherwise; a
 * CPU goes offline and online again through sysfs (PSCI CPU_OFF, AFFINITY_INFO, CPU_ON); with one
 * CPU the seed changes nothing. Snapshots of several CPUs: SmpSnapshotBootTest.
 */
@Tag("kernel")
@Tag("smp")
class Arm64SmpBootTest {
    static final String SUITE = "bookworm";
    static final Arch ARCH = Arch.ARM64;

    record Run(BootRunner.Result result, String console, String command) {
        void assertPoweredOff() {
            assertEquals(BootOutcome.POWERED_OFF, result.outcome(), result.status() + "\n" + console);
        }
    }

    static BootRunner.Options options(ByteArrayOutputStream console) throws Exception {
        return options(SUITE, console);
    }

    static BootRunner.Options options(String suite, ByteArrayOutputStream console) throws Exception {
        return new BootRunner.Options(ARCH, KernelMatrixTest.kernel(suite, ARCH), null, null, 256, 60, console,
                new PrintStream(new ByteArrayOutputStream()));
    }

    /** The default workload on {@code cpus} CPUs under schedule {@code seed}. */
    static Run boot(int cpus, long seed) throws Exception {
        return boot(SUITE, cpus, seed);
    }

    static Run boot(String suite, int cpus, long seed) throws Exception {
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(options(suite, console).withCpus(cpus, seed));
        return new Run(r, console.toString(StandardCharsets.ISO_8859_1), null);
    }

    static Run command(int cpus, String script, Path tmp) throws Exception {
        return command(SUITE, cpus, script, tmp);
    }

    /** {@code kpemu boot -- sh -c SCRIPT} as the CLI and the library run it (CommandGuest's /init, the terminal UART). */
    static Run command(String suite, int cpus, String script, Path tmp) throws Exception {
        byte[] busybox = Files.readAllBytes(GuestImages.forRepository().busybox(ARCH));
        Path initrd = CommandGuest.initramfs(busybox, ARCH, List.of("sh", "-c", script), false).write(tmp.resolve("command.cpio"));
        ByteArrayOutputStream console = new ByteArrayOutputStream(), out = new ByteArrayOutputStream();
        BootRunner.Options o = new BootRunner.Options(ARCH, KernelMatrixTest.kernel(suite, ARCH), initrd, CommandGuest.commandLine(ARCH, null),
                256, 60, console, new PrintStream(new ByteArrayOutputStream()), new GuestTerminal(out, null), null).withCpus(cpus, Schedule.DEFAULT_SEED);
        BootRunner.Result r = BootRunner.boot(o);
        return new Run(r, console.toString(StandardCharsets.ISO_8859_1), out.toString(StandardCharsets.UTF_8));
    }

    static final List<String> BAD = List.of("WARNING:", "BUG:", "Oops", "Kernel panic", "rcu: INFO", "detected stall", "failed to come online", "CPUs started in inconsistent modes",
            "SANITY CHECK");

    static void assertClean(String console) {
        for (String bad : BAD) assertFalse(console.contains(bad), "console shows '" + bad + "':\n" + console);
    }

    /**
     * The console lines QEMU 7.2.22 prints for this kernel and the default initramfs with
     * {@code qemu-system-aarch64 -M virt -cpu cortex-a57 -smp 4 -m 512 -nographic -no-reboot
     * -append "console=ttyAMA0 nokaslr panic=-1 no_timer_check"} (PSCI over HVC there too), and
     * the workload's {@code /proc/interrupts}: one column per CPU, each CPU's virtual timer (PPI 27)
     * ticking on that CPU, function-call IPIs taken (QEMU's: 186 / 200 / 75 / 72).
     */
    @ParameterizedTest(name = "{0} CPUs")
    @ValueSource(ints = {2, 4, 8})
    void linuxBringsUpEveryCpuAndRunsTheWorkloadToPowerOff(int cpus) throws Exception {
        Run r = boot(cpus, Schedule.DEFAULT_SEED);
        r.assertPoweredOff();
        String log = r.console();
        System.out.println("ARM64-SMP cpus=" + cpus + " instructions=" + r.result().instructions() + " guestNanos=" + r.result().guestNanos()
                + " " + r.result().stats());
        assertTrue(log.contains("smp: Bringing up secondary CPUs ..."), log);
        for (int k = 1; k < cpus; k++) {
            assertTrue(log.contains("CPU" + k + ": Booted secondary processor 0x000000000" + k + " [0x411fd070]"), "CPU " + k + ":\n" + log);
        }
        assertTrue(log.contains("smp: Brought up 1 node, " + cpus + " CPUs"), log);
        assertTrue(log.contains("SMP: Total of " + cpus + " processors activated."), log);
        assertTrue(log.contains("CPU: All CPU(s) started at EL1"), log);
        assertTrue(log.contains("rcu: \tRCU restricting CPUs from NR_CPUS=256 to nr_cpu_ids=" + cpus + "."), log);
        assertTrue(log.contains(Initramfs.MARK_DONE), log);
        StringBuilder header = new StringBuilder("\n\\s+");
        for (int k = 0; k < cpus; k++) header.append("CPU").append(k).append("\\s+");
        assertTrue(Pattern.compile(header.toString()).matcher(log).find(), "/proc/interrupts has a column per CPU:\n" + log);
        Matcher timer = Pattern.compile("\\n\\s*\\d+:((?:\\s+\\d+){" + cpus + "})\\s+GIC-0\\s+27 Level\\s+arch_timer").matcher(log);
        assertTrue(timer.find(), "the timer's line:\n" + log);
        for (String count : timer.group(1).trim().split("\\s+")) assertNotEquals("0", count, "every CPU's own timer ticks: " + timer.group());
        Matcher calls = Pattern.compile("\\nIPI1:((?:\\s+\\d+){" + cpus + "})\\s+Function call interrupts").matcher(log);
        assertTrue(calls.find(), log);
        assertTrue(java.util.Arrays.stream(calls.group(1).trim().split("\\s+")).mapToLong(Long::parseLong).sum() > 0, "IPIs were taken: " + calls.group());
        assertClean(log);
    }

    @ParameterizedTest(name = "{0} CPUs")
    @ValueSource(ints = {2, 4})
    void aCommandCountsTheCpus(int cpus, @TempDir Path tmp) throws Exception {
        Run r = command(cpus, "nproc; grep -c ^processor /proc/cpuinfo; cat /sys/devices/system/cpu/online", tmp);
        r.assertPoweredOff();
        assertEquals(0, r.result().commandExit(), r.console());
        assertEquals(cpus + "\n" + cpus + "\n0-" + (cpus - 1) + "\n", r.command());
        assertClean(r.console());
    }

    static java.util.stream.Stream<org.junit.jupiter.params.provider.Arguments> matrix() {
        return KernelMatrixTest.SUITES.stream().flatMap(s -> java.util.stream.Stream.of(2, 4)
                .map(n -> org.junit.jupiter.params.provider.Arguments.of(s, n)));
    }

    /**
     * Every kernel of the matrix (Debian 12's 6.1, 13's 6.12, unstable's 7.x, the recorded builds):
     * the secondaries come up, the default workload runs to power-off, and a command counts the CPUs,
     * takes CPU 1 offline and brings it back.
     */
    @ParameterizedTest(name = "{0} {1} CPUs")
    @org.junit.jupiter.params.provider.MethodSource("matrix")
    void eachKernelOfTheMatrixBringsUpTheCpus(String suite, int cpus, @TempDir Path tmp) throws Exception {
        Run r = boot(suite, cpus, Schedule.DEFAULT_SEED);
        r.assertPoweredOff();
        System.out.println("ARM64-SMP " + suite + " cpus=" + cpus + " instructions=" + r.result().instructions() + " " + r.result().stats());
        assertTrue(r.console().contains("smp: Brought up 1 node, " + cpus + " CPUs"), r.console());
        assertTrue(r.console().contains(Initramfs.MARK_DONE), r.console());
        assertClean(r.console());
        Run c = command(suite, cpus, "nproc; c=/sys/devices/system/cpu; echo 0 > $c/cpu1/online && nproc && echo 1 > $c/cpu1/online && nproc", tmp);
        c.assertPoweredOff();
        assertEquals(0, c.result().commandExit(), c.console());
        assertEquals(cpus + "\n" + (cpus - 1) + "\n" + cpus + "\n", c.command(), "CPU 1 offline and online again");
        assertClean(c.console());
    }

    /** CPU 1 offline (PSCI CPU_OFF, the killer's AFFINITY_INFO) and online again (a second CPU_ON), through sysfs. */
    @Test
    void aCpuGoesOfflineAndOnlineAgain(@TempDir Path tmp) throws Exception {
        Run r = command(4, "c=/sys/devices/system/cpu; echo 0 > $c/cpu1/online && nproc && cat $c/online"
                + " && echo 1 > $c/cpu1/online && nproc && cat $c/online", tmp);
        r.assertPoweredOff();
        assertEquals(0, r.result().commandExit(), r.console());
        assertEquals("3\n0,2-3\n4\n0-3\n", r.command());
        assertTrue(r.console().contains("psci: CPU1 killed (polled 0 ms)"), r.console());
        assertEquals(2, Pattern.compile("CPU1: Booted secondary processor 0x0000000001").matcher(r.console()).results().count(),
                "booted at start-up and again:\n" + r.console());
        assertClean(r.console());
    }

    @Test
    void theSameBootTwiceWithFourCpusIsTheSameRun() throws Exception {
        Run first = boot(4, Schedule.DEFAULT_SEED), second = boot(4, Schedule.DEFAULT_SEED);
        first.assertPoweredOff();
        second.assertPoweredOff();
        System.out.println("ARM64-SMP twice cpus=4 instructions=" + first.result().instructions() + " / " + second.result().instructions());
        assertEquals(first.console(), second.console(), "console, timestamps included");
        assertEquals(first.result().instructions(), second.result().instructions(), "instructions executed");
        assertEquals(first.result().guestNanos(), second.result().guestNanos(), "guest time at power-off");
        assertEquals(first.result().interrupts(), second.result().interrupts(), "interrupts taken");
        assertEquals(first.result().stats(), second.result().stats(), "switches, IPIs, cache maintenance, timer accesses");
    }

    /** Seeded schedules (random order and quanta) boot as well, each its own interleaving. */
    @Test
    void otherSeedsBootAndInterleaveOtherwise() throws Exception {
        List<Long> instructions = new ArrayList<>();
        for (long seed : new long[] {Schedule.DEFAULT_SEED, 7, 12345}) {
            Run r = boot(4, seed);
            r.assertPoweredOff();
            assertTrue(r.console().contains("smp: Brought up 1 node, 4 CPUs"), r.console());
            assertTrue(r.console().contains(Initramfs.MARK_DONE), r.console());
            assertClean(r.console());
            System.out.println("ARM64-SMP seed=" + seed + " instructions=" + r.result().instructions() + " " + r.result().stats());
            instructions.add(r.result().instructions());
        }
        assertEquals(3, instructions.stream().distinct().count(), "three schedules, three interleavings: " + instructions);
    }

    /** One CPU is the machine kpemu always had: the seed has nothing to interleave. */
    @Test
    void withOneCpuTheSeedChangesNothing() throws Exception {
        ByteArrayOutputStream a = new ByteArrayOutputStream(), b = new ByteArrayOutputStream();
        BootRunner.Result plain = BootRunner.boot(options(a));
        BootRunner.Result seeded = BootRunner.boot(options(b).withCpus(1, 12345));
        assertEquals(BootOutcome.POWERED_OFF, plain.outcome(), plain.status());
        assertTrue(Pattern.compile("smp: Brought up 1 node, 1 CPU\\r?\\n").matcher(a.toString(StandardCharsets.ISO_8859_1)).find(),
                a.toString(StandardCharsets.ISO_8859_1));
        assertEquals(a.toString(StandardCharsets.ISO_8859_1), b.toString(StandardCharsets.ISO_8859_1));
        assertEquals(plain.instructions(), seeded.instructions());
        assertEquals(plain.stats(), seeded.stats());
    }

    // snapshots of several CPUs, once refused here: SmpSnapshotBootTest
}
