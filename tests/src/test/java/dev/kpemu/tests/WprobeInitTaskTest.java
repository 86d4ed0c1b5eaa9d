package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;

/**
 * Issue 28: a field of {@code init_task} that the workload writes after the events are registered
 * ({@code nivcsw}: {@code __schedule} counts the idle task's involuntary switches; its offset from
 * the kernel's BTF), against Linux's own accesses recorded under QEMU's gdbstub with an access
 * watchpoint ({@code guest-images/record-watch.sh --access rw --offset OFF x86_64 init_task},
 * {@code reference/x86_64/6.1/watch-init_task+2768-rw.trace}): every write kpemu reports is at the
 * pc gdb reported for the writes (the instruction after the {@code incq}), and the values written
 * are gdb's in order (from the write after the events' registration at {@code init_kprobe_trace}:
 * the idle task's first switch comes before it). The number of writes is not compared (the idle task's switches
 * follow the host's clock under QEMU). Reads are not compared here: gdb's access watchpoint
 * reports a read-modify-write instruction once, as a write, where kpemu's {@code rw} reports a read
 * and a write (docs/watchpoint-notes.md).
 */
@Tag("kernel")
class WprobeInitTaskTest {
    @Test
    void initTaskNivcswWritesAtLinuxsInstructionWithLinuxsValues() throws Exception {
        GuestImages images = GuestImages.forRepository();
        long offset = KernelStructs.forGuest(images, Arch.X86_64).task("nivcsw").offset();
        Path ref = Path.of(System.getProperty("user.dir")).resolveSibling("guest-images")
                .resolve("reference/x86_64/6.1/watch-init_task+" + offset + "-rw.trace");
        Assumptions.assumeTrue(Files.isRegularFile(ref), "no reference for init_task+" + offset + " (another kernel's BTF)");
        List<String> lines = Files.readAllLines(ref);
        String refRelease = lines.stream().filter(l -> l.startsWith("# kernel: ")).findFirst().orElseThrow().split(" ")[2];
        Assumptions.assumeTrue(images.kernelVersion(Arch.X86_64).toString().contains(refRelease),
                "the reference was recorded on " + refRelease);
        List<Long> refValues = new ArrayList<>();
        List<Long> refPcs = new ArrayList<>();
        for (String l : lines) {
            if (!l.startsWith("W ")) continue;
            refPcs.add(Long.parseUnsignedLong(l.split(" ")[1], 16));
            refValues.add(Long.parseUnsignedLong(l.split(" ")[2]));
        }
        assertTrue(refValues.size() >= 5, "Linux wrote init_task.nivcsw: " + refValues);

        WprobeEventsTest.Run run = WprobeEventsTest.boot(List.of("w:nivcsw w@init_task+" + offset + ":8 v=+0($addr):u64"));
        List<TraceRecord> writes = WprobeEventsTest.of(run, "nivcsw");
        assertTrue(writes.size() >= 5, "kpemu saw init_task.nivcsw written: " + writes.size());
        List<Long> values = new ArrayList<>();
        for (TraceRecord r : writes) {
            assertTrue(refPcs.contains(r.ip()), "the write's ip " + Long.toHexString(r.ip()) + " is one gdb reported: " + r.line());
            values.add(r.arg("v").bits());
        }
        // kpemu's events exist from init_kprobe_trace on: the idle task's first switch comes before
        int from = refValues.indexOf(values.get(0));
        assertTrue(from >= 0 && from <= 2, "kpemu's first write " + values.get(0) + " is one of Linux's first: " + refValues);
        int n = Math.min(values.size(), refValues.size() - from);
        assertTrue(n >= 5, "kpemu's and Linux's writes overlap in " + n);
        assertEquals(refValues.subList(from, from + n), values.subList(0, n), "the values written, in order");
    }
}
