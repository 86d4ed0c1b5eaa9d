package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;

/**
 * Hits recorded by the machine's native code (x86-64 ftrace sites whose events read registers
 * only: {@code dev.kpemu.kprobes.RecordedHits}) give the run the Java hit path gives: the same
 * trace lines (context columns, latency column and timestamps included), the same profile counts,
 * console and instruction count, with events that read memory and kretprobes hitting beside them
 * on the Java path, interleaved in order.
 */
@Tag("kernel")
class RecordedHitsTraceTest {
    private static final List<String> DEFINITIONS = List.of(
            "p:kprobes/alloc kmem_cache_alloc s=%di:x64 flags=%si:x32",
            "p:kprobes/openat do_sys_openat2 dfd=%di:s32 how=%dx:x64",
            "p:sec/ security_file_*",
            "p:kprobes/openname do_filp_open name=+0(+0(%si)):string",
            "r:kprobes/openret do_sys_openat2 ret=$retval:s32");

    @Test
    void recordedHitsGiveTheTraceOfTheJavaPath() throws Exception {
        KernelTraceRegressionTest.Run java, recorded;
        String before = System.getProperty("kpemu.x86.recordedHits");
        System.setProperty("kpemu.x86.recordedHits", "false");
        try {
            java = KernelTraceRegressionTest.boot(Arch.X86_64, DEFINITIONS);
        } finally {
            if (before == null) System.clearProperty("kpemu.x86.recordedHits");
            else System.setProperty("kpemu.x86.recordedHits", before);
        }
        recorded = KernelTraceRegressionTest.boot(Arch.X86_64, DEFINITIONS);
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
        assertEquals(a, b, "trace lines, in order, timestamps included");
        assertEquals(java.traced().events().profile(), recorded.traced().events().profile(), "kprobe_profile");
        assertEquals(java.console(), recorded.console(), "console");
        assertEquals(java.result().instructions(), recorded.result().instructions(), "instructions executed");
    }

    /**
     * A listener that may act on the run when it is handed a record (not an
     * {@code EventEngine.PassiveListener}) must get it at the hit: then no hit is recorded natively.
     */
    @Test
    void aListenerThatIsNotPassiveGetsEveryHitAtTheHit() throws Exception {
        dev.kpemu.session.TracedBoot traced = new dev.kpemu.session.TracedBoot(DEFINITIONS, null);
        java.util.concurrent.atomic.AtomicLong seen = new java.util.concurrent.atomic.AtomicLong();
        traced.addSink(r -> seen.incrementAndGet());
        var r = dev.kpemu.boot.BootRunner.boot(new dev.kpemu.boot.BootRunner.Options(Arch.X86_64, null, null, null, 256, 60,
                java.io.OutputStream.nullOutputStream(), null), traced);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status());
        assertTrue(seen.get() > 100, "the listener saw the events: " + seen.get());
        assertEquals(0, traced.kprobes().recordedHits(), "no hit recorded natively");
    }
}
