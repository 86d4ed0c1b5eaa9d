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
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.GuestTerminal;
import dev.kpemu.image.CommandGuest;
import dev.kpemu.image.GuestImages;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Schedule;

/**
 * Issue 26 on x86-64: Debian 12's 6.1 (the recorded build) boots on 2, 4 and 8 virtual CPUs of the
 * APIC board ({@code BootRunner.Options.withCpus}: each vCPU with its local APIC, the MADT listing
 * them, the APs started by Linux's INIT/SIPI through its real-mode trampoline), brings every CPU
 * up as it does under QEMU {@code -smp N}, uses them (interrupts and IPIs on each), runs the
 * default workload and a command to power-off, and the same boot twice is the same run.
 */
@Tag("kernel")
@Tag("smp")
class X86SmpBootTest {
    static final String SUITE = "bookworm";
    static final Arch ARCH = Arch.X86_64;

    record Run(BootRunner.Result result, String console, String terminal) {}

    static BootRunner.Options options(String suite, ByteArrayOutputStream console, int cpus, long seed) throws Exception {
        return new BootRunner.Options(ARCH, KernelMatrixTest.kernel(suite, ARCH), null, null, 256, 60, console,
                new PrintStream(new ByteArrayOutputStream())).withCpus(cpus, seed);
    }

    static BootRunner.Options options(ByteArrayOutputStream console, int cpus, long seed) throws Exception {
        return options(SUITE, console, cpus, seed);
    }

    static Run boot(String suite, int cpus, long seed) throws Exception {
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(options(suite, console, cpus, seed));
        return new Run(r, console.toString(StandardCharsets.ISO_8859_1), "");
    }

    static Run boot(int cpus, long seed) throws Exception { return boot(SUITE, cpus, seed); }

    /** {@code command} as the guest's command ({@link CommandGuest}'s /init, its terminal on COM2), as {@code kpemu boot -- CMD} runs it. */
    static Run command(int cpus, List<String> command) throws Exception { return command(SUITE, cpus, command); }

    static Run command(String suite, int cpus, List<String> command) throws Exception {
        byte[] busybox = Files.readAllBytes(GuestImages.forRepository().busybox(ARCH));
        Path initrd = Files.createTempFile("kpemu-smp-command-", ".cpio");
        try {
            CommandGuest.initramfs(busybox, ARCH, command, false).write(initrd);
            ByteArrayOutputStream console = new ByteArrayOutputStream(), terminal = new ByteArrayOutputStream();
            BootRunner.Options base = options(suite, console, cpus, Schedule.DEFAULT_SEED);
            BootRunner.Options o = new BootRunner.Options(ARCH, base.kernel(), initrd, CommandGuest.commandLine(ARCH, null), base.memoryMiB(),
                    base.timeoutSeconds(), console, base.trace(), new GuestTerminal(terminal, null), null, false, cpus, Schedule.DEFAULT_SEED);
            BootRunner.Result r = BootRunner.boot(o);
            return new Run(r, console.toString(StandardCharsets.ISO_8859_1), terminal.toString(StandardCharsets.ISO_8859_1));
        } finally {
            Files.deleteIfExists(initrd);
        }
    }

    static String why(Run r) { return r.result().status() + "\n" + r.console(); }

    /**
     * The console's SMP lines as QEMU 7.2 printed them for this kernel with {@code -smp N}
     * ({@code qemu_command} of {@code guest-images/qemu-reference.sh} with {@code qemu_cpus=N}: one
     * socket of N cores, which CPUID tells Linux, so one logical package; QEMU's line of CPU numbers
     * is the same, broken up by its APs' calibration warnings, which kpemu's virtual time does not
     * cause), the workload to power-off,
     * and {@code /proc/interrupts} (printed by the workload) with a column per CPU and local timer
     * interrupts and IPIs (rescheduling, function calls) on every CPU.
     */
    @ParameterizedTest(name = "{0} CPUs")
    @ValueSource(ints = {2, 4, 8})
    void linuxBringsUpEveryCpuAndRunsTheWorkload(int cpus) throws Exception {
        Run r = boot(cpus, Schedule.DEFAULT_SEED);
        System.out.println("SMP-BOOT cpus=" + cpus + " outcome=" + r.result().outcome() + " instructions=" + r.result().instructions()
                + " guestNanos=" + r.result().guestNanos() + " hostMs=" + r.result().hostNanos() / 1_000_000 + " " + r.result().stats());
        assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), why(r));
        String log = r.console();
        StringBuilder ids = new StringBuilder();
        for (int i = 1; i < cpus; i++) ids.append(" #").append(i);
        for (String qemu : new String[] {
                "smpboot: Allowing " + cpus + " CPUs, 0 hotplug CPUs",
                "smp: Bringing up secondary CPUs ...",
                "x86: Booting SMP configuration:",
                ".... node  #0, CPUs:     " + ids,
                "smp: Brought up 1 node, " + cpus + " CPUs",
                "smpboot: Max logical packages: 1",
                "smpboot: Total of " + cpus + " processors activated",
                "ACPI: Using IOAPIC for interrupt routing"}) {
            assertTrue(log.contains(qemu), "console lacks QEMU's line '" + qemu + "':\n" + log);
        }
        for (String bad : new String[] {"WARNING:", "BUG:", "Oops", "FW_BUG", "mismatch", "failed to come online", "stuck", "spurious"}) {
            assertFalse(log.contains(bad), "console shows '" + bad + "':\n" + log);
        }
        assertEveryCpuWorks(log, cpus);
    }

    /** /proc/interrupts (the workload prints it) with a column per CPU and local timer interrupts and IPIs on each. */
    static void assertEveryCpuWorks(String log, int cpus) {
        StringBuilder header = new StringBuilder("\\n\\s*");
        for (int i = 0; i < cpus; i++) header.append("CPU").append(i).append("\\s+");
        assertTrue(Pattern.compile(header.toString()).matcher(log).find(), "/proc/interrupts has a column per CPU:\n" + log);
        for (String row : new String[] {"LOC", "RES", "CAL"}) {
            Matcher m = Pattern.compile("\\n\\s*" + row + ":((?:\\s+\\d+){" + cpus + "})").matcher(log);
            assertTrue(m.find(), row + " row:\n" + log);
            for (String n : m.group(1).trim().split("\\s+")) assertTrue(Long.parseLong(n) > 0, row + " on every CPU: " + m.group());
        }
    }

    /**
     * Debian 13's 6.12 and unstable's 7.x on four CPUs (the topology and SMP lines are QEMU 7.2
     * {@code -smp 4}'s for both): they read IA32_APIC_BASE's BSP bit while they enumerate the MADT (without it: "Enumerated BSP APIC 0 is not marked in APICBASE MSR" and one
     * CPU), bring up every CPU and run the workload to power-off.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"trixie", "sid"})
    void newerKernelsBringUpEveryCpu(String suite) throws Exception {
        int cpus = 4;
        Run r = boot(suite, cpus, Schedule.DEFAULT_SEED);
        System.out.println("SMP-BOOT " + suite + " cpus=" + cpus + " outcome=" + r.result().outcome() + " instructions=" + r.result().instructions()
                + " hostMs=" + r.result().hostNanos() / 1_000_000);
        assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), why(r));
        String log = r.console();
        for (String line : new String[] {
                "CPU topo: Allowing " + cpus + " present CPUs plus 0 hotplug CPUs",
                "CPU topo: Max. logical packages:   1",
                "CPU topo: Num. cores per package:     " + cpus,
                "smp: Brought up 1 node, " + cpus + " CPUs",
                "smpboot: Total of " + cpus + " processors activated"}) {
            assertTrue(log.contains(line), "console lacks '" + line + "':\n" + log);
        }
        for (String bad : new String[] {"APICBASE", "Rejected CPUs", "WARNING:", "BUG:", "Oops", "FW_BUG", "failed to come online"}) {
            assertFalse(log.contains(bad), "console shows '" + bad + "':\n" + log);
        }
        assertEveryCpuWorks(log, cpus);
    }

    /** {@code nproc} in a guest command prints N, and the command's exit reaches the host. */
    @ParameterizedTest(name = "{0}, {1} CPUs")
    @CsvSource({"bookworm, 2", "bookworm, 4", "trixie, 4", "sid, 4"})
    void nprocInAGuestCommandPrintsTheCpus(String suite, int cpus) throws Exception {
        Run r = command(suite, cpus, List.of("sh", "-c", "nproc; grep -c ^processor /proc/cpuinfo"));
        assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), why(r));
        assertEquals(0, r.result().commandExit(), why(r));
        assertEquals(cpus + "\n" + cpus + "\n", r.terminal(), why(r));
    }

    /**
     * Text the guest patches after the APs are up is run patched on every CPU: each CPU first runs
     * {@code do_sys_openat2} (a {@code cat} pinned to it), so each vCPU's engine holds its translation; then
     * ftrace's function tracer on {@code do_sys_openat2} rewrites its ftrace site (a NOP becomes a call,
     * {@code text_poke_bp} from one CPU, the others synchronized by IPIs), and a {@code cat} pinned to
     * each CPU again must appear in the trace on that CPU. With an engine that kept running its old
     * translation, that CPU's {@code cat} would leave no event.
     */
    @ParameterizedTest(name = "{0} CPUs")
    @ValueSource(ints = {4})
    void textPatchedByOneCpuRunsPatchedOnEvery(int cpus) throws Exception {
        String each = "for c in $(seq 0 " + (cpus - 1) + "); do taskset -c $c cat /proc/version >/dev/null; done";
        String script = each + "; cd /sys/kernel/tracing && echo do_sys_openat2 > set_ftrace_filter && echo function > current_tracer && "
                + each + "; echo 0 > tracing_on; for c in $(seq 0 " + (cpus - 1) + "); do echo cpu$c $(grep -c \"cat-[0-9]* *\\[00$c\\]\" trace); done";
        Run r = command(cpus, List.of("sh", "-c", script));
        System.out.println("SMP-COHERENCE " + r.terminal().replace("\n", " ") + " " + r.result().stats());
        assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), why(r));
        assertEquals(0, r.result().commandExit(), r.terminal() + why(r));
        Matcher m = Pattern.compile("cpu(\\d+) (\\d+)").matcher(r.terminal());
        int seen = 0;
        while (m.find()) {
            seen++;
            assertTrue(Integer.parseInt(m.group(2)) > 0, "cat's do_sys_openat2 traced on CPU " + m.group(1) + ":\n" + r.terminal());
        }
        assertEquals(cpus, seen, r.terminal());
    }

    /**
     * CPU hotplug through sysfs: CPU 1 goes offline (Linux parks it in its dead loop) and online
     * again (INIT and STARTUP once more: the AP starts over in real mode), and a task pinned to it
     * runs there.
     */
    @Test
    void aCpuGoesOfflineAndOnlineAgain() throws Exception {
        String online = "/sys/devices/system/cpu/cpu1/online";
        Run r = command(4, List.of("sh", "-c", "echo 0 > " + online + "; nproc; cat " + online + "; echo 1 > " + online
                + "; nproc; cat " + online + "; taskset -c 1 sh -c 'grep -c ^processor /proc/cpuinfo; cut -d\" \" -f39 /proc/self/stat'"));
        System.out.println("SMP-HOTPLUG " + r.terminal().replace("\n", " | "));
        assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), why(r));
        assertEquals(0, r.result().commandExit(), r.terminal() + why(r));
        assertEquals("3\n0\n4\n1\n4\n1\n", r.terminal(), "nproc and online while CPU 1 is off and on again; the pinned task's CPU (stat field 39)");
        assertTrue(r.console().contains("smpboot: CPU 1 is now offline"), r.console());
    }

    /**
     * Four CPUs, the same boot twice: byte-identical console, the same instructions, guest time and
     * interrupts. Another schedule seed ({@code withCpus(4, seed)}: other quanta and order) boots as
     * well, through another interleaving (another instruction count to power-off).
     */
    @Test
    void sameFourCpuBootTwiceIsTheSameRun() throws Exception {
        Run first = boot(4, Schedule.DEFAULT_SEED), second = boot(4, Schedule.DEFAULT_SEED), seeded = boot(4, 7);
        System.out.println("SMP-DETERMINISM instructions=" + first.result().instructions() + "/" + second.result().instructions()
                + " seed 7: " + seeded.result().instructions());
        for (Run r : List.of(first, second, seeded)) assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), why(r));
        assertTrue(seeded.console().contains("smp: Brought up 1 node, 4 CPUs"), seeded.console());
        assertNotEquals(first.result().instructions(), seeded.result().instructions(), "seed 7 runs another interleaving");
        assertTrue(first.console().contains("smp: Brought up 1 node, 4 CPUs"), first.console());
        assertEquals(first.console(), second.console(), "console");
        assertEquals(first.result().instructions(), second.result().instructions(), "instructions executed");
        assertEquals(first.result().guestNanos(), second.result().guestNanos(), "guest time at power-off");
        assertEquals(first.result().interrupts(), second.result().interrupts(), "interrupts taken");
    }
}
