package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.BootSnapshot;
import dev.kpemu.image.Initramfs;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.kprobes.events.TraceComparator;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;
import dev.kpemu.session.TracedBoot;

/**
 * The x86-64 PC with the reference machine's interrupt controllers ({@code BootRunner.Options.withX86Apic},
 * {@code boot --x86-apic}: a local APIC, an I/O APIC, the MADT, CPUID's APIC bit, one CPU) on
 * Debian 12's 6.1, the build the references were recorded on: Linux finds and uses the APICs as its
 * console under QEMU {@code -M pc} says it does, the recorded probe scripts trace as Linux's own
 * (recorded under that QEMU), the same boot twice is the same run, and a snapshot of this machine
 * restores into the same run.
 */
@Tag("kernel")
@Tag("smp")
class X86ApicBoardTest {
    static final String SUITE = "bookworm";
    static final Arch ARCH = Arch.X86_64;

    record Run(BootRunner.Result result, List<String> trace, String console, List<String> notices) {}

    static Run boot(List<String> definitions, boolean armAtInit, Path snapshot) throws Exception {
        TracedBoot traced = new TracedBoot(definitions, null);
        if (armAtInit) traced.armAtInit(true);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        List<String> notices = new ArrayList<>();
        BootRunner.Options o = new BootRunner.Options(ARCH, KernelMatrixTest.kernel(SUITE, ARCH), null, null, 256, 60, console,
                new PrintStream(new ByteArrayOutputStream())).withX86Apic(true);
        BootRunner.Result r = BootRunner.boot(o, traced, snapshot == null ? null : BootSnapshot.file(snapshot, notices::add));
        assertTrue(traced.rejectedAtRegistration() == null, () -> "the kernel refused a definition: " + traced.rejectedAtRegistration());
        return new Run(r, traced.records().stream().map(TraceRecord::line).toList(), console.toString(StandardCharsets.ISO_8859_1), notices);
    }

    /**
     * The console's interrupt and timer lines, each as QEMU 7.2's console printed it for this
     * kernel ({@code qemu-system-x86_64 -M pc -m 512 -nographic -no-reboot -kernel vmlinux -initrd
     * initramfs.cpio -append "console=ttyS0 nokaslr panic=-1 no_timer_check"}), and the workload's
     * {@code /proc/interrupts} with the timer and the UART on the I/O APIC and local timer interrupts.
     */
    @Test
    void linuxFindsAndUsesTheApicsAsUnderQemu() throws Exception {
        Run r = boot(List.of(), false, null);
        assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), r.result().status() + "\n" + String.join("\n", r.result().lastLines()));
        String log = r.console();
        for (String qemu : new String[] {
                "ACPI: LAPIC_NMI (acpi_id[0xff] dfl dfl lint[0x1])",
                "IOAPIC[0]: apic_id 0, version 32, address 0xfec00000, GSI 0-23",
                "ACPI: INT_SRC_OVR (bus 0 bus_irq 0 global_irq 2 dfl dfl)",
                "ACPI: INT_SRC_OVR (bus 0 bus_irq 5 global_irq 5 high level)",
                "ACPI: INT_SRC_OVR (bus 0 bus_irq 9 global_irq 9 high level)",
                "ACPI: INT_SRC_OVR (bus 0 bus_irq 10 global_irq 10 high level)",
                "ACPI: INT_SRC_OVR (bus 0 bus_irq 11 global_irq 11 high level)",
                "ACPI: Using ACPI (MADT) for SMP configuration information",
                "smpboot: Allowing 1 CPUs, 0 hotplug CPUs",
                "APIC: Switch to symmetric I/O mode setup",
                "..TIMER: vector=0x30 apic1=0 pin1=2 apic2=-1 pin2=-1",
                "smp: Bringing up secondary CPUs ...",
                "smp: Brought up 1 node, 1 CPU",
                "smpboot: Total of 1 processors activated",
                "ACPI: Using IOAPIC for interrupt routing"}) {
            assertTrue(log.contains(qemu), "console lacks QEMU's line '" + qemu + "':\n" + log);
        }
        for (String pic : new String[] {"No local APIC present", "APIC: Keep in PIC mode(8259)", "Using PIC for interrupt routing", "XT-PIC"}) {
            assertFalse(log.contains(pic), "the PIC-only machine's line '" + pic + "'");
        }
        assertTrue(Pattern.compile("\\n\\s*0:\\s+[1-9]\\d*\\s+IO-APIC\\s+2-edge\\s+timer").matcher(log).find(), "PIT on I/O APIC pin 2:\n" + log);
        assertTrue(Pattern.compile("\\n\\s*4:\\s+[1-9]\\d*\\s+IO-APIC\\s+4-edge\\s+ttyS0").matcher(log).find(), "ttyS0 on pin 4:\n" + log);
        assertTrue(Pattern.compile("\\n\\s*9:\\s+\\d+\\s+IO-APIC\\s+9-fasteoi\\s+acpi").matcher(log).find(), "SCI level (fasteoi) on pin 9:\n" + log);
        assertTrue(Pattern.compile("\\nLOC:\\s+[1-9]\\d*\\s+Local timer interrupts").matcher(log).find(), "the local APIC timer ticks:\n" + log);
        for (String bad : new String[] {"WARNING:", "BUG:", "Oops", "IO-APIC + timer doesn't work", "spurious", "FW_BUG"}) {
            assertFalse(log.contains(bad), "console shows '" + bad + "':\n" + log);
        }
    }

    /**
     * Each recorded script's trace against Linux's own, as {@link KernelMatrixTest#traceEqualsLinuxOwn}
     * compares it on the default machine (exact: same build).
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"open", "kretprobes", "args", "fidelity", "boottime", "exitpath", "fetchquirks", "optip", "ftraceregs"})
    void traceEqualsLinuxOwn(String script) throws Exception {
        Map<String, String> v = KernelMatrixTest.version(SUITE, ARCH);
        Path ref = KernelTraceRegressionTest.REFERENCE.resolve(ARCH.linuxName()).resolve(ReferenceTrace.series(v.get("release"))).resolve(script + ".trace");
        Assumptions.assumeTrue(Files.isRegularFile(ref), "no " + script + " reference recorded for " + v.get("release"));
        ReferenceTrace reference = ReferenceTrace.read(KernelTraceRegressionTest.REFERENCE, ARCH, script, v.get("release"));
        Run r = boot(reference.definitions(), false, null);
        assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), r.result().status() + "\n" + String.join("\n", r.result().lastLines()));
        TraceComparator.Result cmp;
        if (KernelMatrixTest.TASK_NAMED.contains(script) && reference.definitions().stream().anyMatch(d -> d.contains(" c=$comm"))) {
            cmp = TraceComparator.compareEvents(KernelMatrixTest.workloadTasks(reference.events()), KernelMatrixTest.workloadTasks(reference.eventsOf(r.trace())),
                    TraceComparator.mode(reference, v.get("release"), v.get("version")));
        } else {
            cmp = TraceComparator.compare(reference, r.trace(), v.get("release"), v.get("version"));
        }
        System.out.println("APIC-TRACE " + script + " mode=" + cmp.mode() + " matches=" + cmp.matches() + " events=" + cmp.actualEvents() + " reference=" + cmp.expectedEvents());
        assertEquals(TraceComparator.Mode.EXACT, cmp.mode());
        assertTrue(cmp.matches(), script + ": " + cmp.report());
        assertTrue(cmp.expectedEvents() > 10, "events compared: " + cmp.expectedEvents());
        for (String bad : new String[] {"WARNING:", "ftrace failed", "ftrace bug", "text_poke", "BUG:", "Oops"}) {
            assertFalse(r.console().contains(bad), "console shows '" + bad + "':\n" + r.console());
        }
    }

    /** The same kernel, initramfs, script and machine twice: byte-identical console and trace, same instructions. */
    @Test
    void sameBootTwiceIsTheSameRun() throws Exception {
        List<String> defs = new ArrayList<>(DeterministicRunTest.definitions(ARCH, "open"));
        defs.addAll(DeterministicRunTest.definitions(ARCH, "kretprobes"));
        Run first = boot(defs, false, null), second = boot(defs, false, null);
        for (Run r : List.of(first, second)) assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), r.result().status());
        assertTrue(first.trace().size() > 20, "the workload hits the probes: " + first.trace().size());
        assertEquals(first.trace(), second.trace(), "trace lines, timestamps included");
        assertEquals(first.console(), second.console(), "console");
        assertEquals(first.result().instructions(), second.result().instructions(), "instructions executed");
        assertEquals(first.result().guestNanos(), second.result().guestNanos(), "guest time at power-off");
        assertEquals(first.result().interrupts(), second.result().interrupts(), "interrupts taken");
    }

    /**
     * A snapshot of the APIC machine at run_init_process (local APIC, I/O APIC and their pending
     * timer event in it) restores into the run the saving boot and a cold boot made; its trace is
     * Linux's own.
     */
    @Test
    void snapshotOfTheApicMachineRestoresIntoTheSameRun() throws Exception {
        Map<String, String> v = KernelMatrixTest.version(SUITE, ARCH);
        ReferenceTrace reference = ReferenceTrace.read(KernelTraceRegressionTest.REFERENCE, ARCH, "open", v.get("release"));
        Path dir = Files.createTempDirectory("kpemu-apic-snapshot");
        Path file = dir.resolve("boot.snapshot");
        try {
            Run cold = boot(reference.definitions(), true, null);
            Run saving = boot(reference.definitions(), true, file);
            Run restored = boot(reference.definitions(), true, file);
            for (Run r : List.of(cold, saving, restored)) assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), r.result().status());
            assertFalse(saving.result().snapshot().restored(), "the first boot saves: " + saving.notices());
            assertTrue(restored.result().snapshot().restored(), "the second boot starts from the file: " + restored.notices());
            assertTrue(restored.console().contains(Initramfs.MARK_DONE), restored.console());
            assertTrue(saving.console().endsWith(restored.console()), "console from the snapshot point on");
            assertEquals(saving.trace(), restored.trace(), "trace lines, timestamps included");
            assertEquals(cold.trace(), restored.trace(), "the cold boot's trace");
            assertEquals(cold.console(), saving.console(), "the cold boot's console");
            assertEquals(cold.result().instructions(), restored.result().instructions(), "instructions to power-off");
            assertEquals(saving.result().interrupts(), restored.result().interrupts(), "interrupts taken");
            TraceComparator.Result cmp = TraceComparator.compare(reference, restored.trace(), v.get("release"), v.get("version"));
            assertTrue(cmp.matches(), cmp.report());
        } finally {
            Files.deleteIfExists(file);
            Files.deleteIfExists(dir);
        }
    }
}
