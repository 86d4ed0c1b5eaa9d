package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.boot.BootHooks;
import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.boot.LinuxGuest;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.btf.BtfLocator;
import dev.kpemu.machine.Arch;

/**
 * {@link UprobeMappings} on Debian's booted kernel, against Linux's own uprobes recorded under
 * QEMU ({@code guest-images/reference/ARCH/SERIES/uprobes.trace}, record-uprobes.sh): the guest runs
 * the recording's workload ({@code /bin/busybox true} twice, {@code busybox true one two}), and
 * every process that execs busybox gets a mapping of {@code /bin/busybox} in which the recorded
 * probe's file offset ({@code @ENTRY@}, busybox's _start) is at the address Linux's trace line
 * shows ({@code ustart: (0x40ebf0)} on x86-64), one address space per exec; and the dead
 * processes' address spaces are forgotten ({@code uprobe_clear_state}) by the end of the boot.
 */
@Tag("kernel")
class UprobeMappingsBootTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void everyExecOfBusyboxMapsTheProbedOffsetWhereLinuxHitIt(Arch arch) throws Exception {
        RecordedUprobes rec = RecordedUprobes.forBootedKernel(arch);
        GuestImages images = rec.images();
        String release = rec.release();
        String text = rec.text();
        long entry = hex(find(text, "@ENTRY@ = 0x([0-9a-f]+)"));
        long linuxIp = hex(find(text, "\\] \\S+ ustart: \\(0x([0-9a-f]+)\\)"));
        // one ustart line per exec of busybox while Linux traced: the workload's
        int workloadExecs = (int) text.lines().filter(l -> l.matches("\\s*\\S+-\\d+\\s+\\[\\d+\\] \\S+ ustart: .*")).count();

        Initramfs guest = rec.workloadGuest(false);
        Path initrd = Files.createTempFile("kpemu-uprobes", ".cpio");
        UprobeMappings[] tracker = new UprobeMappings[1];
        List<UprobeMappings.Mapping> entryMappings = new ArrayList<>();
        List<String> wrongAddress = new ArrayList<>();
        try {
            guest.write(initrd);
            BootHooks hooks = new BootHooks() {
                @Override public void ready(LinuxGuest g) {
                    try {
                        var btf = BtfLocator.forGuest(images, arch, g.symbols()).btf();
                        tracker[0] = new UprobeMappings(g.machine(), btf, g.symbols(), Set.of("/bin/busybox"));
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                    tracker[0].onMapped(mp -> {
                        if (!mp.exec() || mp.addressOf(entry) < 0) return;
                        entryMappings.add(mp);
                        if (mp.addressOf(entry) != linuxIp) wrongAddress.add(mp.toString());
                    });
                    tracker[0].install();
                }
            };
            ByteArrayOutputStream console = new ByteArrayOutputStream();
            BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, null, initrd, null, 256, 120, console,
                    new PrintStream(new ByteArrayOutputStream())), hooks);
            String log = console.toString(StandardCharsets.ISO_8859_1);
            assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + log.substring(Math.max(0, log.length() - 2000)));
            assertTrue(log.contains(Initramfs.MARK_DONE), "the workload ran");
        } finally {
            Files.deleteIfExists(initrd);
        }
        assertEquals(List.of(), wrongAddress, "busybox's _start (file offset 0x" + Long.toHexString(entry) + ") where Linux hit it: 0x" + Long.toHexString(linuxIp));
        // every exec maps it once: the workload's (as many as Linux traced), init's shell and
        // poweroff (counted as mappings: a freed mm_struct's memory serves the next process)
        assertEquals(workloadExecs + 2, entryMappings.size(), "mappings of busybox's _start: " + entryMappings);
        // the workload's processes are gone (uprobe_clear_state); init's shell and poweroff are not
        Map<Long, List<UprobeMappings.Mapping>> left = tracker[0].all();
        assertEquals(2, left.size(), "address spaces left at power-off: " + left);
        assertTrue(tracker[0].hookCalls() > 0, "the hooks ran");
    }

    private static String find(String text, String regex) {
        Matcher m = Pattern.compile(regex).matcher(text);
        assertTrue(m.find(), "the reference has no " + regex);
        return m.group(1);
    }

    private static long hex(String s) { return Long.parseUnsignedLong(s, 16); }
}
