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
 * {@link UprobeEvents}' trace lines on Debian's booted kernel against Linux's own
 * ({@code reference/ARCH/SERIES/uprobes.trace}, record-uprobes.sh): the recording's probes
 * ({@code uprobes.ARCH.events}: registers, {@code $stackN}, user strings, {@code @+0},
 * {@code +u0(%sp)}, {@code $comm}; two return probes on true_main with {@code $retval}, fired
 * newest first) placed from boot, the recording's workload run; and {@code uprobe_profile}.
 * Each of Linux's lines equals kpemu's but for the pid and the user stack addresses (ASLR: they
 * differ between any two runs, Linux's own included) and the timestamp (not recorded). kpemu's
 * probes also see init's shell and its {@code mount} of /proc start (before the workload, as in
 * the recording's /init) and poweroff's: two {@code ustart} lines before Linux's and one after.
 */
@Tag("kernel")
class UprobeEventsBootTest {
    private static final Pattern EVENT = Pattern.compile("^\\s*\\S+-\\d+\\s+\\[\\d+\\] \\S+ (\\w+): ");
    /** The timestamp column of kpemu's line (the recording removed Linux's). */
    private static final Pattern TIMESTAMP = Pattern.compile("(\\] \\S+)\\s+\\d+\\.\\d+: ");

    /**
     * What is not compared against Linux, as {@link TraceComparator} does not: the task column
     * (Linux prints its saved comm of the pid, kpemu the current one) and the need-resched
     * character; and the user stack addresses (x86-64 0x7ff..., arm64 0xffff... below TASK_SIZE).
     * On a kernel with CONFIG_PREEMPTION a uprobe's word is borrowed through (depth {@code ff},
     * {@link LatencyLayout#userColumn}): the decrement then runs through the need-resched bits
     * into the irq and hardirq characters, which so depend on the timer too and are not compared.
     * With {@code latency} false the column is not compared at all.
     */
    static String normalized(String line, Arch arch, boolean latency) {
        String s = line.replaceFirst("^\\s*\\S+-\\d+\\s+(\\[\\d+\\] )(\\S)\\S", "TASK-PID $1$2?");
        if (!latency) s = s.replaceFirst("^(TASK-PID \\[\\d+\\] )\\S{5}", "$1?????");
        else s = s.replaceFirst("^(TASK-PID \\[\\d+\\] )\\S\\?\\Sff", "$1???ff");
        return arch == Arch.X86_64 ? s.replaceAll("0x7ff[0-9a-f]{9}\\b", "0xSTACK") : s.replaceAll("0xffff[0-9a-f]{8}\\b", "0xSTACK");
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void entryProbeLinesAreLinuxs(Arch arch) throws Exception {
        RecordedUprobes rec = RecordedUprobes.forBootedKernel(arch);
        GuestImages images = rec.images();
        String release = rec.release();
        List<String> lines = rec.lines();
        Initramfs guest = rec.workloadGuest(true);
        // the recording's definitions (as recorded, offsets filled in), entry probes only
        UprobeParser parser = new UprobeParser(arch, Dialect.forRelease(release), new InitramfsFiles(guest));
        List<UprobeDef> probes = new ArrayList<>();
        for (String l : lines) {
            if (!l.startsWith("#   ")) continue;
            if (parser.parse(l.substring(4)) instanceof UprobeDef d) probes.add(d);
        }
        assertEquals(4, probes.size(), "the recording's probes: " + probes);
        assertEquals(2, probes.stream().filter(UprobeDef::isReturn).count(), "two return probes: " + probes);
        // arm64 7.2: Linux prints `.....` (no borrow) though the kernel has CONFIG_PREEMPTION, as
        // x86-64 7.2 does not; why is open (docs/uprobe-notes.md): the column is left out there
        boolean latency = true;   // also arm64 7.x's (LatencyLayout.userColumn)
        List<String> linux = new ArrayList<>();
        for (String l : lines) {
            Matcher m = EVENT.matcher(l);
            if (m.find() && probes.stream().anyMatch(p -> p.event().equals(m.group(1)))) linux.add(normalized(l, arch, latency));
        }
        assertTrue(linux.size() >= 2 && linux.getFirst().contains(" ustart: "), "Linux's entry lines: " + linux);

        List<String> kpemu = new ArrayList<>();
        List<UprobeEvents> engine = new ArrayList<>();
        Path initrd = Files.createTempFile("kpemu-uprobes", ".cpio");
        try {
            guest.write(initrd);
            BootHooks hooks = new BootHooks() {
                @Override public void ready(LinuxGuest g) {
                    try {
                        var btf = BtfLocator.forGuest(images, arch, g.symbols()).btf();
                        UprobeMappings mappings = new UprobeMappings(g.machine(), btf, g.symbols(), Set.of("/bin/busybox"));
                        var structs = g.kernelStructs();
                        var symbols = KallsymsSymbols.forKernel(g.symbols(), arch, g.kernelContents());
                        UprobeEvents events = new UprobeEvents(g.machine(), symbols, structs, btf, Dialect.forRelease(release),
                                mappings, new InitramfsFiles(guest), probes,
                                EventEngine.DEFAULT_FIRST_EVENT_ID, r -> kpemu.add(TIMESTAMP.matcher(r.line()).replaceFirst("$1 ")));
                        new UprobeSites(g.machine(), btf, mappings, probes, events::hit);
                        engine.add(events);
                        mappings.install();
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
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
        String all = String.join("\n", kpemu);
        assertTrue(kpemu.size() == linux.size() + 3, "init's shell, mount, Linux's, poweroff:\n" + all);
        assertTrue(kpemu.get(0).contains(" ustart: (") && kpemu.get(0).endsWith(" arg8=\"init\""), all);
        assertTrue(kpemu.get(1).contains(" ustart: (") && kpemu.get(1).endsWith(" arg8=\"mount\""), all);
        assertTrue(kpemu.getLast().contains(" ustart: (") && kpemu.getLast().contains(" arg4=\"poweroff\""), all);
        List<String> workload = kpemu.subList(2, kpemu.size() - 1).stream().map(l -> normalized(l, arch, latency)).toList();
        assertEquals(String.join("\n", linux), String.join("\n", workload));

        // uprobe_profile: Linux's hits counted from its enable, kpemu's from boot: true_main runs
        // only in the workload (equal counts); _start also before it and in the dump's sed runs
        List<String> profile = lines.stream().filter(l -> l.startsWith("% ")).map(l -> l.substring(2)).toList();
        List<String> ours = engine.getFirst().profile();
        assertEquals(profile.size(), ours.size(), String.join("\n", ours));
        java.util.function.Function<String, String> uncounted = l -> l.replaceFirst("\\d+$", "N");
        for (String l : profile) {
            if (l.contains(" ustart ")) assertTrue(ours.stream().map(uncounted).anyMatch(uncounted.apply(l)::equals), l + " in\n" + ours);
            else assertTrue(ours.contains(l), l + " in\n" + String.join("\n", ours));
        }
    }
}
