package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;

/**
 * Hits recorded by the machine's native code (x86-64 ftrace sites and arm64 breakpoints whose
 * events read registers only: {@code dev.kpemu.kprobes.RecordedHits}) give the run the Java hit
 * path gives, on both arches: the same
 * trace lines (context columns, latency column and timestamps included), the same profile counts,
 * console and instruction count, with events that read memory and kretprobes hitting beside them
 * on the Java path, interleaved in order. Events that read kernel memory (fields, dereferences, a
 * bitfield, a string; user memory on x86-64) are recorded too, their reads made at the hit; one whose
 * read faults goes to the Java path, which prints the fault as Linux does.
 */
@Tag("kernel")
class RecordedHitsTraceTest {
    private static final List<String> DEFINITIONS = List.of(
            "p:kprobes/alloc kmem_cache_alloc s=%di:x64 flags=%si:x32",
            // a pointer's low bits as narrow types: hex, signed (negative too) and unsigned of 8, 16 and 32 bits
            "p:kprobes/narrow kfree x=%di:x16 s=%di:s8 u=%di:u32 w=%di:s64",
            "p:kprobes/openat do_sys_openat2 dfd=%di:s32 how=%dx:x64",
            "p:sec/ security_file_*",
            "p:kprobes/openname do_filp_open name=+0(+0(%si)):string",
            "r:kprobes/openret do_sys_openat2 ret=$retval:s32",
            // __queue_work runs under queue_work_on's local_irq_save: the same task and preempt count, interrupts off
            "p:kprobes/queue queue_work_on cpu=%di:s32",
            "p:kprobes/queueoff __queue_work cpu=%di:s32",
            // kernel memory the native code reads at the hit: fields, a dereference, a bitfield, $comm
            "p:kprobes/readfile vfs_read head=+0(%di):x64 flags=+68(%di):x32 ino=+64(+32(%di)):u64 bits=+68(%di):b4@1/32 c=$comm",
            "p:kprobes/writefile vfs_write count=$arg3:u64 flags=+68(%di):x32 buf=$arg2:x64 ra=+0(%sp):x64",
            // kretprobe entries recorded, with the site's reads; one instance each: the misses counted as on the
            // Java path; one whose site's event reads the return address's slot, which the swap changes: the Java path's
            "r1:kprobes/readret vfs_read ret=$retval:s64",
            "r1:kprobes/waitret do_wait ret=$retval:s64",
            "r1:kprobes/kthreadret kthread",
            // two kretprobes on one function: two instances a frame, whose returns the Java path runs newest first
            "r:kprobes/waitagain do_wait ret=$retval:x64",
            // the ip at a recorded return: the real return address, as the Java path's handler sees it
            "r:kprobes/writeret vfs_write ret=$retval:s64 at=%ip:x64",
            // a dereference of a per-CPU offset (a user address): the native code leaves the hit to the Java path
            "p:kprobes/freecpu kmem_cache_free cpu=+0(+0(%di)):x64 size=+24(%di):u32",
            // user memory: a path name's first byte and the name
            "p:kprobes/getname getname_flags first=+u0(%di):u8 name=+0(%di):ustring",
            // user memory printed as numbers: the native code writes the line
            "p:kprobes/userbytes ksys_write n=%dx first=+u0(%si):u8 two=+u1(%si):x16",
            // below the stack pointer: the return address of the ftrace call Linux makes at the site (site + 5)
            "p:kprobes/pushed security_inode_permission ra=-8(%sp):x64");

    private static final List<String> ARM64_DEFINITIONS = List.of(
            "p:kprobes/alloc kmem_cache_alloc s=%x0:x64 flags=%x1:x32",
            "p:kprobes/narrow kfree x=%x0:x16 s=%x0:s8 u=%x0:u32 w=%x0:s64",
            "p:kprobes/openat do_sys_openat2 dfd=%x0:s32 how=%x2:x64",
            "p:sec/ security_file_*",
            "p:kprobes/openname do_filp_open name=+0(+0(%x1)):string",
            "r:kprobes/openret do_sys_openat2 ret=$retval:s32",
            "p:kprobes/queue queue_work_on cpu=%x0:s32",
            "p:kprobes/queueoff __queue_work cpu=%x0:s32",
            "p:kprobes/readfile vfs_read head=+0(%x0):x64 flags=+68(%x0):x32 ino=+64(+32(%x0)):u64 bits=+68(%x0):b4@1/32 c=$comm lr=%x30",
            // a kretprobe entry recorded: the probe that runs after it sees the trampoline in lr, as on the Java path
            "r1:kprobes/readret vfs_read ret=$retval:s64",
            "r1:kprobes/waitret do_wait ret=$retval:s64",
            "r1:kprobes/kthreadret kthread",
            "r:kprobes/waitagain do_wait ret=$retval:x64",
            "r:kprobes/writeret vfs_write ret=$retval:s64 at=%pc:x64",
            "p:kprobes/writefile vfs_write count=$arg3:u64 flags=+68(%x0):x32 buf=$arg2:x64",
            "p:kprobes/freecpu kmem_cache_free cpu=+0(+0(%x0)):x64 size=+24(%x0):u32",
            "p:kprobes/getname getname_flags first=+u0(%x0):u8 name=+0(%x0):ustring",
            "p:kprobes/userbytes ksys_write n=%x2 first=+u0(%x1):u8 two=+u1(%x1):x16");

    private static List<String> definitions(Arch arch) { return arch == Arch.X86_64 ? DEFINITIONS : ARM64_DEFINITIONS; }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void recordedHitsGiveTheTraceOfTheJavaPath(Arch arch) throws Exception {
        KernelTraceRegressionTest.Run java = onTheJavaPath(() -> KernelTraceRegressionTest.boot(arch, definitions(arch)));
        KernelTraceRegressionTest.Run recorded = KernelTraceRegressionTest.boot(arch, definitions(arch));
        for (KernelTraceRegressionTest.Run r : List.of(java, recorded)) {
            assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), r.result().status());
        }
        assertEquals(0, java.traced().kprobes().recordedHits(), "the Java path records nothing natively");
        long n = recorded.traced().kprobes().recordedHits();
        List<String> a = java.traced().records().stream().map(TraceRecord::line).toList();
        List<String> b = recorded.traced().records().stream().map(TraceRecord::line).toList();
        assertTrue(n > 100 && n < b.size(), "most register-only hits recorded natively, the others on the Java path: " + n + " of " + b.size());
        assertTrue(b.stream().anyMatch(l -> l.contains("openname:")) && b.stream().anyMatch(l -> l.contains("openret:")),
                "events that read memory and kretprobes trace beside them");
        long registerOnly = b.stream().filter(l -> l.matches(".* (alloc|narrow|queue|queueoff|p_security_\\w+): .*")).count();
        long readFile = b.stream().filter(l -> l.contains(" readfile: ")).count();
        assertTrue(readFile > 0 && b.stream().anyMatch(l -> l.contains(" freecpu: ")) && b.stream().anyMatch(l -> l.contains(" userbytes: ")),
                "the memory-reading events hit");
        if (arch == Arch.X86_64) {      // below the stack pointer, recorded or not: the ftrace call's return address, one text address
            List<String> ra = b.stream().filter(l -> l.contains(" pushed: ")).map(l -> l.replaceAll(".* ra=", "")).distinct().toList();
            assertTrue(ra.size() == 1 && ra.get(0).startsWith("0xffffffff8"), "the return address of the site's call: " + ra);
        }
        assertTrue(n > registerOnly, "hits of the event that reads kernel memory recorded natively too: " + n + " recorded, "
                + registerOnly + " register-only lines, " + readFile + " readfile lines");
        assertEquals(a, b, "trace lines, in order, timestamps included");
        assertTrue(recorded.traced().kprobes().recordedReturnEntries() > 0 && b.stream().anyMatch(l -> l.contains(" readret: ")),
                "kretprobe entries recorded natively: " + recorded.traced().kprobes().recordedReturnEntries());
        // returns recorded at the trampoline (readret's, openret's), and returns of two instances a frame on the Java path
        assertTrue(recorded.traced().kprobes().recordedReturns() > 0, "kretprobe returns recorded natively: " + recorded.traced().kprobes().recordedReturns());
        assertEquals(0, java.traced().kprobes().recordedReturns(), "the Java path records no return");
        assertTrue(b.stream().anyMatch(l -> l.contains(" waitagain: ")) && b.stream().anyMatch(l -> l.contains(" waitret: ")),
                "both kretprobes of one function trace");
        // kthread never returns: its one instance stays taken and every later kthread's entry is missed, counted
        // as the Java path counts it (the profile below); do_wait's instance comes back at each return
        String kthreadret = recorded.traced().events().profile().lines().filter(l -> l.contains("kthreadret")).findFirst().orElseThrow();
        assertTrue(Long.parseLong(kthreadret.strip().split("\\s+")[2]) > 10, "entries missed while the instance is taken: " + kthreadret);
        assertEquals(java.traced().events().profile(), recorded.traced().events().profile(), "kprobe_profile");
        assertEquals(java.console(), recorded.console(), "console");
        assertEquals(java.result().instructions(), recorded.result().instructions(), "instructions executed");

        // streamed, as the CLI's text trace is: no record is kept, each recorded hit is formatted straight
        // into its line and reuses the context columns of a recent recorded hit with the same captured words
        ByteArrayOutputStream text = new ByteArrayOutputStream();
        dev.kpemu.session.TracedBoot streaming = new dev.kpemu.session.TracedBoot(definitions(arch),
                new PrintStream(text, false, StandardCharsets.ISO_8859_1)).keepRecords(false);
        var s = dev.kpemu.boot.BootRunner.boot(new dev.kpemu.boot.BootRunner.Options(arch, null, null, null, 256, 60,
                OutputStream.nullOutputStream(), null), streaming);
        assertEquals(BootOutcome.POWERED_OFF, s.outcome(), s.status());
        assertTrue(streaming.kprobes().recordedHits() > 100, "hits recorded natively when streamed: " + streaming.kprobes().recordedHits());
        // streamed, most recorded hits' lines are written by the native code (the columns of a context it
        // was told, or the engine's put in front), which the comparison below checks byte for byte
        assertTrue(streaming.kprobes().recordedLines() > streaming.kprobes().recordedHits() / 2,
                "lines formatted natively: " + streaming.kprobes().recordedLines() + " of " + streaming.kprobes().recordedHits());
        assertEquals(0, recorded.traced().kprobes().recordedLines(), "no line formatted natively while records are kept");
        // kretprobe returns' lines too, once the engine told the head of a return to its caller
        assertTrue(streaming.kprobes().passedReturnLines() > 0, "return lines passed on as text: " + streaming.kprobes().passedReturnLines()
                + " of " + streaming.kprobes().recordedReturns() + " returns recorded");
        // the native code writes a task's columns itself: a new task in a state it was told needs no columns
        // from the engine (boot's tasks come and go: 1,421 of 35,011 lines on x86-64 and 1,488 of 24,354 on
        // arm64 came without them while each task's states were told apart; 588 and 459 since)
        long withoutColumns = streaming.events().recordedLinesWithoutColumns();
        assertTrue(withoutColumns * 33 < streaming.kprobes().recordedLines(),
                "lines written natively without their columns: " + withoutColumns + " of " + streaming.kprobes().recordedLines());
        List<String> streamed = List.of(dev.kpemu.kprobes.events.GuestText.decode(text.toByteArray()).split("\n"));
        assertTrue(streamed.stream().map(l -> l.substring(0, l.indexOf(']') + 8)).distinct().count() > 5,
                "lines of several contexts (task, pid, latency column)");
        assertTrue(streamed.stream().anyMatch(l -> l.contains("queueoff:")), "hits with interrupts off beside hits with them on");
        assertEquals(a, streamed, "streamed lines, in order, timestamps included");
        // most of them went on as text, runs of consecutive hits' lines at once, their hits counted per probe
        assertTrue(streaming.kprobes().passedLines() > streaming.kprobes().recordedLines() / 2,
                "lines passed on as text: " + streaming.kprobes().passedLines() + " of " + streaming.kprobes().recordedLines());
        assertEquals(java.traced().events().profile(), streaming.events().profile(), "kprobe_profile when streamed");
        assertEquals(streamed.size(), streaming.eventCount(), "events counted, none kept");
        assertEquals(b.size(), recorded.traced().eventCount(), "events counted, all kept");
    }

    /**
     * With two vCPUs each records its own hits (a ring per vCPU, read back before another vCPU
     * runs): the seeded schedule's trace is the Java path's, line for line, with both CPUs'
     * columns, and the run executes the same instructions.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    @org.junit.jupiter.api.Tag("smp")
    void twoCpusRecordTheTraceOfTheJavaPath(Arch arch) throws Exception {
        Run java = onTheJavaPath(() -> bootTwoCpus(arch));
        Run recorded = bootTwoCpus(arch);
        for (Run r : List.of(java, recorded)) assertEquals(BootOutcome.POWERED_OFF, r.result().outcome(), r.result().status());
        assertEquals(0, java.traced().kprobes().recordedHits(), "the Java path records nothing natively");
        List<String> a = java.traced().records().stream().map(TraceRecord::line).toList();
        List<String> b = recorded.traced().records().stream().map(TraceRecord::line).toList();
        long n = recorded.traced().kprobes().recordedHits();
        assertTrue(n > 100, "hits recorded natively: " + n);
        assertTrue(recorded.traced().kprobes().recordedReturns() > 0, "kretprobe returns recorded natively, a table both vCPUs share: "
                + recorded.traced().kprobes().recordedReturns());
        assertTrue(b.stream().anyMatch(l -> l.contains("[000]")) && b.stream().anyMatch(l -> l.contains("[001]")), "both CPUs trace");
        assertEquals(a, b, "trace lines, in order, timestamps and CPU columns included");
        assertEquals(java.result().instructions(), recorded.result().instructions(), "instructions executed");

        // streamed: each vCPU's native code writes its hits' lines with the columns it was told on that vCPU
        ByteArrayOutputStream text = new ByteArrayOutputStream();
        dev.kpemu.session.TracedBoot streaming = new dev.kpemu.session.TracedBoot(definitions(arch),
                new PrintStream(text, false, StandardCharsets.ISO_8859_1)).keepRecords(false);
        var s = dev.kpemu.boot.BootRunner.boot(new dev.kpemu.boot.BootRunner.Options(arch, null, null, null, 256, 60,
                OutputStream.nullOutputStream(), null).withCpus(2, dev.kpemu.machine.Schedule.DEFAULT_SEED), streaming);
        assertEquals(BootOutcome.POWERED_OFF, s.outcome(), s.status());
        assertTrue(streaming.kprobes().recordedLines() > 100, "lines formatted natively: " + streaming.kprobes().recordedLines());
        assertEquals(a, List.of(dev.kpemu.kprobes.events.GuestText.decode(text.toByteArray()).split("\n")),
                "streamed lines of both vCPUs, in order");
    }

    private record Run(dev.kpemu.boot.BootRunner.Result result, dev.kpemu.session.TracedBoot traced) { }

    private static Run bootTwoCpus(Arch arch) throws Exception {
        dev.kpemu.session.TracedBoot traced = new dev.kpemu.session.TracedBoot(definitions(arch), null);
        var r = dev.kpemu.boot.BootRunner.boot(new dev.kpemu.boot.BootRunner.Options(arch, null, null, null, 256, 60,
                java.io.OutputStream.nullOutputStream(), null).withCpus(2, dev.kpemu.machine.Schedule.DEFAULT_SEED), traced);
        return new Run(r, traced);
    }

    /**
     * A listener that may act on the run when it is handed a record (not an
     * {@code EventEngine.PassiveListener}) must get it at the hit: then no event's hit is recorded
     * natively (a kretprobe's entry alone still is: it makes no record).
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void aListenerThatIsNotPassiveGetsEveryHitAtTheHit(Arch arch) throws Exception {
        dev.kpemu.session.TracedBoot traced = new dev.kpemu.session.TracedBoot(definitions(arch), null);
        java.util.concurrent.atomic.AtomicLong seen = new java.util.concurrent.atomic.AtomicLong();
        traced.addSink(r -> seen.incrementAndGet());
        var r = dev.kpemu.boot.BootRunner.boot(new dev.kpemu.boot.BootRunner.Options(arch, null, null, null, 256, 60,
                java.io.OutputStream.nullOutputStream(), null), traced);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status());
        assertTrue(seen.get() > 100, "the listener saw the events: " + seen.get());
        // only kretprobe entries on points of no other probe, which hand nothing to a listener (their returns do, at the hit)
        assertTrue(traced.kprobes().recordedReturnEntries() > 0, "kretprobe entries recorded: " + traced.kprobes().recordedReturnEntries());
        assertEquals(traced.kprobes().recordedReturnEntries(), traced.kprobes().recordedHits(), "no event's hit recorded natively");
    }

    /**
     * A filter written in the middle of a streamed run (at the console's "Run /init" line, the
     * same guest instruction with and without native recording) holds back the recorded hits after
     * it as the Java path does: lines stop going on as text once the engine is told of the filter.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void aFilterWrittenMidRunHoldsBackRecordedLinesAsTheJavaPathDoes(Arch arch) throws Exception {
        FilteredRun java = onTheJavaPath(() -> streamWithFilterAtInit(arch));
        FilteredRun recorded = streamWithFilterAtInit(arch);
        assertEquals(0, java.traced().kprobes().recordedHits(), "the Java path records nothing natively");
        assertTrue(recorded.traced().kprobes().passedLines() > 100, "lines passed on as text: " + recorded.traced().kprobes().passedLines());
        assertTrue(java.filteredAt() > 0 && java.filteredAt() < java.lines().size(), "the filter was written mid-run: after line "
                + java.filteredAt() + " of " + java.lines().size());
        java.util.function.Predicate<String> heldBack = l -> l.contains(" alloc: ") && !l.endsWith(" flags=0xcc0");
        assertTrue(java.lines().subList(0, java.filteredAt()).stream().anyMatch(heldBack)
                && java.lines().subList(java.filteredAt(), java.lines().size()).stream().noneMatch(heldBack)
                && java.lines().subList(java.filteredAt(), java.lines().size()).stream().anyMatch(l -> l.contains(" alloc: ")),
                "the filter holds back the allocations of other flags after it, not the others");
        assertEquals(java.filteredAt(), recorded.filteredAt(), "the filter written after the same lines");
        assertEquals(java.lines(), recorded.lines(), "streamed lines, in order, timestamps included");
        assertEquals(java.traced().events().profile(), recorded.traced().events().profile(), "kprobe_profile");
    }

    private record FilteredRun(dev.kpemu.session.TracedBoot traced, List<String> lines, int filteredAt) { }

    /** A streamed boot whose console's "Run /init" line writes {@code flags == 0xcc0} to the allocations' filter. */
    private static FilteredRun streamWithFilterAtInit(Arch arch) throws Exception {
        ByteArrayOutputStream text = new ByteArrayOutputStream();
        dev.kpemu.session.TracedBoot traced = new dev.kpemu.session.TracedBoot(definitions(arch),
                new PrintStream(text, false, StandardCharsets.ISO_8859_1)).keepRecords(false);
        int[] filteredAt = {-1};
        OutputStream console = new OutputStream() {
            private final StringBuilder line = new StringBuilder();

            @Override
            public void write(int b) {
                if (filteredAt[0] >= 0) return;
                if (b != '\n') {
                    line.append((char) b);
                    return;
                }
                if (line.toString().contains("Run /init")) {
                    try {
                        traced.events().setFilter("kprobes/alloc", "flags == 0xcc0");
                    } catch (dev.kpemu.kprobes.events.filter.FilterParseException e) {
                        throw new AssertionError(e);
                    }
                    filteredAt[0] = (int) text.toString(StandardCharsets.ISO_8859_1).chars().filter(c -> c == '\n').count();
                }
                line.setLength(0);
            }
        };
        var r = dev.kpemu.boot.BootRunner.boot(new dev.kpemu.boot.BootRunner.Options(arch, null, null, null, 256, 60, console, null), traced);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status());
        return new FilteredRun(traced, List.of(dev.kpemu.kprobes.events.GuestText.decode(text.toByteArray()).split("\n")), filteredAt[0]);
    }

    /** {@code run} with every hit on the Java path ({@code -Dkpemu.recordedHits=false}): the reference the recorded runs must equal. */
    private static <T> T onTheJavaPath(java.util.concurrent.Callable<T> run) throws Exception {
        String before = System.getProperty("kpemu.recordedHits");
        System.setProperty("kpemu.recordedHits", "false");
        try {
            return run.call();
        } finally {
            if (before == null) System.clearProperty("kpemu.recordedHits");
            else System.setProperty("kpemu.recordedHits", before);
        }
    }
}
