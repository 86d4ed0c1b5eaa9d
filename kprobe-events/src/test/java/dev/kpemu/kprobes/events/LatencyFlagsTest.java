package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

import dev.kpemu.kprobes.events.LatencyPaths.Kernel;
import dev.kpemu.machine.Arch;

/**
 * ftrace's trace context word and latency column ({@link LatencyFlags}) and what each probe path
 * adds ({@link LatencyPaths}). Expected columns are Linux's own, as the recorded traces under
 * {@code guest-images/reference/ARCH/SERIES/*.trace} show them for the state named (the probed
 * code's state worked out by hand from kernel/trace/trace.c, include/linux/preempt.h and the entry
 * paths named in {@link LatencyPaths}).
 */
class LatencyFlagsTest {
    private static final Kernel X86_61 = new Kernel(Arch.X86_64, true, false, false);
    private static final Kernel X86_72 = new Kernel(Arch.X86_64, true, true, false);
    private static final Kernel ARM64_61 = new Kernel(Arch.ARM64, false, false, false);
    private static final Kernel ARM64_612 = new Kernel(Arch.ARM64, false, false, true);
    private static final Kernel ARM64_72 = new Kernel(Arch.ARM64, true, true, true);

    private static LatencyFlags.State guest(boolean irqsOff, int preempt) {
        return new LatencyFlags.State(irqsOff, preempt, false, false, false, 0);
    }

    private static String column(Kernel k, LatencyPaths.Path p, LatencyFlags.State s, int ops) {
        return LatencyFlags.column(LatencyPaths.traceContext(k, p, s, ops));
    }

    @Test
    void x86Int3HitBorrowsFromTheFlagsWhenThePreemptByteIsZero() {
        // exc_int3 → irqentry_nmi_enter: NMI + HARDIRQ counts, interrupts off; tracing_gen_ctx_dec
        // decrements a zero preempt byte: x86_64 6.1 corpus prints "..Zff" (226 lines)
        assertEquals("..Zff", column(X86_61, LatencyPaths.Path.BREAKPOINT, guest(false, 0), 1));
        // the probed code held one preempt_disable: "d.Z.." (x86_64 6.12 corpus, 87 lines)
        assertEquals("d.Z..", column(X86_61, LatencyPaths.Path.BREAKPOINT, guest(false, 1), 1));
        assertEquals("d.Z1.", column(X86_61, LatencyPaths.Path.BREAKPOINT, guest(true, 2), 1));
        // with both need-resched flags: ".NZff" (x86_64 6.1 corpus, 40 lines)
        assertEquals(".NZff", column(X86_61, LatencyPaths.Path.BREAKPOINT,
                new LatencyFlags.State(false, 0, true, false, true, 0), 1));
        // the 7.x lazy flag: "dlZ.." (x86_64 7.2 corpus)
        assertEquals("dlZ..", column(X86_72, LatencyPaths.Path.BREAKPOINT,
                new LatencyFlags.State(false, 1, false, true, false, 0), 1));
    }

    @Test
    void x86FtraceJumpAndReturnPathsShowTheProbedCodesDepth() {
        // one preempt_disable on the path, discounted by tracing_gen_ctx_dec: "....." at a function's entry
        assertEquals(".....", column(X86_61, LatencyPaths.Path.FTRACE, guest(false, 0), 1));
        assertEquals("d..1.", column(X86_61, LatencyPaths.Path.FTRACE, guest(true, 1), 1));   // do_notify_parent+0x0 under tasklist_lock
        assertEquals("...1.", column(X86_61, LatencyPaths.Path.JUMP, guest(false, 1), 1));   // put_unused_fd+0x45 under file_lock
        assertEquals(".....", column(X86_61, LatencyPaths.Path.KRETPROBE_RETURN, guest(false, 0), 1));
        assertEquals("d..2.", column(X86_72, LatencyPaths.Path.KRETPROBE_RETURN, guest(true, 2), 1));
    }

    @Test
    void fprobeDepthsFollowTheFtraceOpsOnTheFunction() {
        // recorded fprobes.trace: vfs_readlink+0x4 (one fprobe) 6.12 "....." 7.2 "...1."; vfs_read+0x4
        // (three fprobes) 6.12 "...1." 7.2 "...2."; exits "...1."; tracepoints "...1."
        assertEquals(".....", column(X86_61, LatencyPaths.Path.FPROBE_ENTRY, guest(false, 0), 1));
        assertEquals("...1.", column(X86_61, LatencyPaths.Path.FPROBE_ENTRY, guest(false, 0), 3));
        assertEquals("...1.", column(X86_72, LatencyPaths.Path.FPROBE_ENTRY, guest(false, 0), 1));
        assertEquals("...2.", column(X86_72, LatencyPaths.Path.FPROBE_ENTRY, guest(false, 0), 2));
        assertEquals("...2.", column(ARM64_72, LatencyPaths.Path.FPROBE_ENTRY, guest(false, 0), 2));
        for (Kernel k : new Kernel[] {X86_61, X86_72, ARM64_72}) {
            assertEquals("...1.", column(k, LatencyPaths.Path.FPROBE_EXIT, guest(false, 0), 1));
            // 6.12's tracepoint call (__DO_TRACE) holds its preempt_disable_notrace in the guest; 7.x's none
            assertEquals("...1.", column(k, LatencyPaths.Path.TRACEPOINT, guest(false, k.fprobeOnFgraph() ? 0 : 1), 1));
        }
    }

    @Test
    void arm64BrkPathsMaskInterruptsAndCountOnlyWithPreemption() {
        // arm64 6.1 and 6.12 have no CONFIG_PREEMPT_COUNT: depth always 0, no decrement
        assertEquals("d....", column(ARM64_61, LatencyPaths.Path.BREAKPOINT, guest(false, 0), 1));
        assertEquals("d....", column(ARM64_612, LatencyPaths.Path.KRETPROBE_RETURN, guest(false, 0), 1));
        // 6.1's kretprobe trampoline is no exception: the returning code's interrupt state ("....." and "d....")
        assertEquals(".....", column(ARM64_61, LatencyPaths.Path.KRETPROBE_RETURN, guest(false, 0), 1));
        // 7.2: debug_exception_enter's preempt_disable, discounted: "d...." and "d..1."
        assertEquals("d....", column(ARM64_72, LatencyPaths.Path.BREAKPOINT, guest(false, 0), 1));
        assertEquals("d..1.", column(ARM64_72, LatencyPaths.Path.BREAKPOINT, guest(true, 1), 1));
        // the BRK trampoline and kprobe_busy_begin: "d..1." for a return to preemptible code
        assertEquals("d..1.", column(ARM64_72, LatencyPaths.Path.KRETPROBE_RETURN, guest(false, 0), 1));
    }

    @Test
    void softirqBhAndMigrateDisableColumns() {
        int ctx = LatencyFlags.traceContext(new LatencyFlags.State(false, LatencyFlags.SOFTIRQ_OFFSET + 1, false, false, false, 0), false);
        assertEquals("..s1.", LatencyFlags.column(ctx));
        ctx = LatencyFlags.traceContext(new LatencyFlags.State(true, 2 * LatencyFlags.SOFTIRQ_OFFSET, false, false, false, 2), false);
        assertEquals("D...2", LatencyFlags.column(ctx));
        ctx = LatencyFlags.traceContext(new LatencyFlags.State(false, LatencyFlags.HARDIRQ_OFFSET + LatencyFlags.SOFTIRQ_OFFSET + 20, false, false, false, 0), false);
        assertEquals("..Hf.", LatencyFlags.column(ctx), "preempt depth capped at f");
    }

    /** Every latency column the recorded traces hold decodes to common_flags / common_preempt_count and prints back the same. */
    @Test
    void everyRecordedColumnRoundTrips() throws Exception {
        Path ref = RecordedReferenceTest.reference();
        org.junit.jupiter.api.Assumptions.assumeTrue(ref != null, "no recorded reference in this checkout");
        Pattern col = Pattern.compile("\\[\\d{3}\\] (\\S{5}) +\\d+\\.\\d{6}: ");
        Set<String> seen = new TreeSet<>();
        try (Stream<Path> files = Files.walk(ref)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".trace")).toList()) {
                for (String line : Files.readAllLines(f, java.nio.charset.StandardCharsets.ISO_8859_1)) {  // a trace may hold non-UTF-8 bytes (rawbytes)
                    Matcher m = col.matcher(line);
                    if (m.find()) seen.add(m.group(1));
                }
            }
        }
        assertTrue(seen.size() >= 20, "distinct columns recorded: " + seen);
        for (String c : seen) {
            int ctx = LatencyFlags.flagsOf(c) << 16 | LatencyFlags.preemptCountOf(c);
            assertEquals(c, LatencyFlags.column(ctx), "column " + c);
        }
        assertEquals(LatencyFlags.NMI | LatencyFlags.HARDIRQ, LatencyFlags.flagsOf("..Zff"));
        assertEquals(0xff, LatencyFlags.preemptCountOf("..Zff"));
        assertEquals(LatencyFlags.IRQS_OFF | LatencyFlags.NEED_RESCHED_LAZY, LatencyFlags.flagsOf("dl.1."));
    }

    @Test
    void comparatorIgnoresOnlyNeedResched() {
        assertTrue(TraceComparator.sameStructuralLatency("dN.1.", "d..1."));
        assertTrue(TraceComparator.sameStructuralLatency(".l...", "....."));
        assertFalse(TraceComparator.sameStructuralLatency("d....", "....."));
        assertFalse(TraceComparator.sameStructuralLatency("..Zff", "d.Z.."));
        assertFalse(TraceComparator.sameStructuralLatency("...1.", "....."));
    }
}
