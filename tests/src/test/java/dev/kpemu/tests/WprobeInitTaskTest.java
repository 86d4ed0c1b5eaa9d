package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.btf.KernelStructs;
import dev.kpemu.kprobes.events.TraceRecord;
import dev.kpemu.machine.Arch;

/**
 * Issue 28: a field of {@code init_task} that the workload writes after the events are registered
 * ({@code nivcsw}: {@code __schedule} counts the idle task's involuntary switches; its offset from
 * the kernel's BTF), against Linux's own accesses recorded under QEMU's gdbstub with an access
 * watchpoint ({@code guest-images/record-watch.sh --access rw --offset OFF ARCH init_task},
 * {@code reference/ARCH/6.1/watch-init_task+OFF-rw.trace}, its {@code R} and {@code W} lines):
 * kpemu's {@code rw} event gives gdb's accesses, line for line, as (ip, value) pairs.
 * <ul>
 * <li>x86-64 ({@code w@init_task+OFF}, kallsyms): the read-modify-write {@code incq} once, as a
 * write (gdb's awatch and x86's DR7 RW=11 report it once), at the pc gdb reported (the instruction
 * after it: x86's data breakpoints trap after the access), the value after it.</li>
 * <li>arm64 ({@code w@0xADDR}: Debian's arm64 kallsyms has no data symbols; the address is the
 * recording's, Linux's SP_EL0 at {@code start_kernel}, i.e. {@code init_task}, plus the offset):
 * {@code ++} is a load and a store, two accesses at two instructions; gdb reports each after it
 * (pc + 4, the value after), kpemu at the accessing instruction with the value before it (the
 * architecture's watchpoint exception is taken before the access). So each gdb line becomes
 * (pc − 4, the value before: a read's own value, a write's the line before's).</li>
 * </ul>
 * kpemu's records start at the registration of the events ({@code init_kprobe_trace}): gdb's first
 * reads and the idle task's first switch come earlier, so the comparison starts at kpemu's first
 * record among gdb's first lines. The number of accesses is not compared (the idle task's
 * switches follow the host's clock under QEMU).
 */
@Tag("kernel")
class WprobeInitTaskTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void initTaskNivcswAccessesAreLinuxsLineForLine(Arch arch) throws Exception {
        GuestImages images = GuestImages.forRepository();
        long offset = KernelStructs.forGuest(images, arch).task("nivcsw").offset();
        Path ref = Path.of(System.getProperty("user.dir")).resolveSibling("guest-images")
                .resolve("reference/" + arch.linuxName() + "/6.1/watch-init_task+" + offset + "-rw.trace");
        Assumptions.assumeTrue(Files.isRegularFile(ref), "no reference for init_task+" + offset + " (another kernel's BTF)");
        List<String> lines = Files.readAllLines(ref);
        String refRelease = header(lines, "kernel").split(" ")[0];
        Assumptions.assumeTrue(images.kernelVersion(arch).toString().contains(refRelease),
                "the reference was recorded on " + refRelease);
        List<String> refAccesses = new ArrayList<>();
        String before = null;
        for (String l : lines) {
            if (!l.startsWith("W ") && !l.startsWith("R ")) continue;
            String[] f = l.split(" ");
            if (arch == Arch.X86_64) {
                refAccesses.add(f[1] + " " + f[2]);
            } else {
                String value = l.startsWith("R ") ? f[2] : before;
                refAccesses.add(Long.toHexString(Long.parseUnsignedLong(f[1], 16) - 4) + " " + value);
            }
            before = f[2];
        }
        assertTrue(refAccesses.size() >= 5, "Linux accessed init_task.nivcsw: " + refAccesses);

        String at = arch == Arch.X86_64 ? "init_task+" + offset : "0x" + header(lines, "address");
        WprobeEventsTest.Run run = WprobeEventsTest.boot(arch, List.of("w:nivcsw rw@" + at + ":8 v=+0($addr):u64"));
        List<String> accesses = new ArrayList<>();
        for (TraceRecord r : WprobeEventsTest.of(run, "nivcsw")) accesses.add(Long.toHexString(r.ip()) + " " + Long.toUnsignedString(r.arg("v").bits()));
        assertTrue(accesses.size() >= 5, "kpemu saw init_task.nivcsw accessed: " + accesses);
        // kpemu's events exist from init_kprobe_trace on: gdb's first reads and the idle task's first switch come before
        int from = refAccesses.indexOf(accesses.get(0));
        assertTrue(from >= 0 && from <= 8, "kpemu's first access " + accesses.get(0) + " is one of Linux's first: " + refAccesses);
        int n = Math.min(accesses.size(), refAccesses.size() - from);
        assertTrue(n >= 5, "kpemu's and Linux's accesses overlap in " + n);
        assertEquals(refAccesses.subList(from, from + n), accesses.subList(0, n), "the accesses (ip, value), in order");
    }

    private static String header(List<String> lines, String name) {
        return lines.stream().filter(l -> l.startsWith("# " + name + ": ")).findFirst().orElseThrow()
                .substring(name.length() + 4);
    }
}
