package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;
import dev.kpemu.session.TracedBoot;

/**
 * Issue 28: {@code w:} events (linux-next's wprobe syntax, kpemu's extension on every kernel) on
 * Debian's x86-64 kernel, against Linux's own writes of {@code jiffies} recorded under QEMU's
 * gdbstub ({@code guest-images/record-watch.sh x86_64}, {@code reference/x86_64/6.1/watch-jiffies.trace}):
 * the event's {@code $addr} is the address Linux has, each record's ip is one of the pcs gdb
 * reported for the writes (x86's data breakpoints report the instruction after the access), and
 * the fetched value of jiffies rises at every write. The number of writes is not compared (QEMU
 * ticks with the host's clock). Then 64 wprobes at once, one of them 4 KiB long (reads of the
 * idle task's first page) and one on {@code init_task.comm} (its offset from the kernel's BTF)
 * for reads and writes: the jiffies event's records are the same, line for line, as with it
 * alone, each at one of gdb's pcs; none of the 61 watches on {@code empty_zero_page} (which Linux
 * keeps zero and never touches here) fires; the page's reads come from kernel functions. ({@code init_task.comm} is not accessed after the events are registered, at
 * {@code init_kprobe_trace}, in this workload: its event stays silent; its records, if any, must read "swapper/0".)
 */
@Tag("kernel")
class WprobeEventsTest {
    static final String JIFFIES = "w:jw w@jiffies:8 value=+0($addr):u64 addr=$addr:x64";

    record Run(List<TraceRecord> records, List<String> listing) {}

    static Run boot(List<String> defs) throws Exception {
        return boot(Arch.X86_64, defs);
    }

    static Run boot(Arch arch, List<String> defs) throws Exception {
        TracedBoot traced = new TracedBoot(defs, null);
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, null, null, null, 256, 60,
                console, new PrintStream(new ByteArrayOutputStream())), traced);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + String.join("\n", r.lastLines()));
        assertTrue(console.toString().contains(dev.kpemu.image.Initramfs.MARK_DONE), "the workload ran");
        return new Run(traced.records(), List.of(traced.events().listing().split("\n")));
    }

    static List<TraceRecord> of(Run run, String event) {
        return run.records().stream().filter(r -> r.event().equals(event)).toList();
    }

    @Test
    void jiffiesWritesAtLinuxsInstructionsWithRisingValues() throws Exception {
        Run run = boot(List.of(JIFFIES));
        assertEquals(List.of("w:wprobes/jw w@jiffies:8 value=+0($addr):u64 addr=$addr:x64"), run.listing());
        List<TraceRecord> jw = of(run, "jw");
        assertTrue(jw.size() > 50, "jiffies writes: " + jw.size());

        Path ref = Path.of(System.getProperty("user.dir")).resolveSibling("guest-images")
                .resolve("reference/x86_64/6.1/watch-jiffies.trace");
        List<String> lines = Files.readAllLines(ref);
        String refRelease = lines.stream().filter(l -> l.startsWith("# kernel: ")).findFirst().orElseThrow().split(" ")[2];
        Assumptions.assumeTrue(GuestImages.forRepository().kernelVersion(Arch.X86_64).toString().contains(refRelease),
                "the reference was recorded on " + refRelease);
        long refAddress = -1;
        TreeSet<Long> refIps = new TreeSet<>();
        for (String l : lines) {
            if (l.startsWith("# address: ")) refAddress = Long.parseUnsignedLong(l.substring(11).trim(), 16);
            if (l.startsWith("W ")) refIps.add(Long.parseUnsignedLong(l.split(" ")[1], 16));
        }
        long previous = 0;
        TreeSet<Long> ips = new TreeSet<>();
        for (TraceRecord r : jw) {
            assertEquals(refAddress, r.arg("addr").bits(), "$addr: jiffies where Linux has it");
            long value = r.arg("value").bits();
            assertTrue(Long.compareUnsigned(value, previous) > 0, "jiffies rises: " + previous + " then " + r.line());
            previous = value;
            ips.add(r.ip());
            assertTrue(r.line().matches(".*\\[000] d\\SZ\\S\\S +[0-9]+\\.[0-9]{6}: jw: \\(\\w+\\+0x[0-9a-f]+/0x[0-9a-f]+\\) value=\\d+ addr=0x[0-9a-f]+"),
                    r.line());
        }
        assertTrue(refIps.containsAll(ips), "kpemu's ips " + hex(ips) + " are among the pcs gdb reported " + hex(refIps));
    }

    @Test
    void sixtyFourWprobesOneAPageLongOneOnInitTasksComm() throws Exception {
        long comm = KernelStructs.forGuest(GuestImages.forRepository(), Arch.X86_64).commOffset();
        List<String> defs = new ArrayList<>();
        defs.add(JIFFIES);
        defs.add("w:comm rw@init_task+" + comm + ":16 c=+0($addr):string");
        defs.add("w:page r@init_task:4096 first=+0($addr):x64");
        for (int i = 0; i < 61; i++) defs.add("w:z" + i + " rw@empty_zero_page+" + (64 * i) + ":8");
        Run all = boot(defs);
        assertEquals(64, all.listing().size(), String.join("\n", all.listing()));
        assertEquals("w:wprobes/comm rw@init_task+" + comm + ":16 c=+0($addr):string", all.listing().get(1));
        assertEquals("w:wprobes/page r@init_task:4096 first=+0($addr):x64", all.listing().get(2));
        List<TraceRecord> page = of(all, "page");
        assertTrue(page.size() > 100, "the idle task's first page is read: " + page.size());
        for (TraceRecord r : of(all, "comm")) assertEquals("swapper/0", r.arg("c").value(), r.line());
        for (int i = 0; i < 61; i++)
            assertEquals(List.of(), of(all, "z" + i), "nobody reads or writes empty_zero_page (Linux keeps it zero)");
        TreeSet<Long> refIps = gdbsJiffiesWriteIps();
        for (TraceRecord r : of(all, "jw"))
            assertTrue(refIps.contains(r.ip()), "with 64 wprobes, a jiffies write at one of gdb's pcs: " + r.line());
        for (TraceRecord r : page)
            assertTrue(r.line().matches(".*: page: \\([\\w.]+\\+0x[0-9a-f]+/0x[0-9a-f]+\\) first=0x[0-9a-f]+"),
                    "a read of the idle task's page by a kernel function: " + r.line());

        Run alone = boot(List.of(JIFFIES));
        assertEquals(of(alone, "jw").stream().map(TraceRecord::line).toList(), of(all, "jw").stream().map(TraceRecord::line).toList(),
                "the jiffies event with 63 other wprobes set, timestamps included");
    }

    /** The pcs of Linux's own writes of jiffies, as gdb reported them under QEMU (the recorded reference). */
    private static TreeSet<Long> gdbsJiffiesWriteIps() throws Exception {
        Path ref = Path.of(System.getProperty("user.dir")).resolveSibling("guest-images")
                .resolve("reference/x86_64/6.1/watch-jiffies.trace");
        List<String> lines = Files.readAllLines(ref);
        String refRelease = lines.stream().filter(l -> l.startsWith("# kernel: ")).findFirst().orElseThrow().split(" ")[2];
        Assumptions.assumeTrue(GuestImages.forRepository().kernelVersion(Arch.X86_64).toString().contains(refRelease),
                "the reference was recorded on " + refRelease);
        TreeSet<Long> ips = new TreeSet<>();
        for (String l : lines) if (l.startsWith("W ")) ips.add(Long.parseUnsignedLong(l.split(" ")[1], 16));
        return ips;
    }

    private static List<String> hex(java.util.Collection<Long> v) { return v.stream().map(Long::toHexString).toList(); }
}
