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
 * {@link UprobeSites} on Debian's booted kernel against Linux's own uprobes
 * ({@code reference/ARCH/SERIES/uprobes.trace}, record-uprobes.sh): the recording's entry probes
 * ({@code p} lines of {@code uprobes.ARCH.events}, parsed by {@link UprobeParser}) placed from
 * boot, the recording's workload run. Linux traced the workload's three processes; kpemu's probes
 * also see init's shell start (busybox's _start, before the workload) and poweroff's: the hits
 * are those two around Linux's, each the same event at the same address.
 */
@Tag("kernel")
class UprobeSitesBootTest {
    private static final Pattern LINE = Pattern.compile("^\\s*\\S+-\\d+\\s+\\[\\d+\\] \\S+ (\\w+): \\((0x[0-9a-f]+)\\)");

    @ParameterizedTest
    @EnumSource(Arch.class)
    void entryProbesHitWhereAndWhenLinuxHitThem(Arch arch) throws Exception {
        RecordedUprobes rec = RecordedUprobes.forBootedKernel(arch);
        GuestImages images = rec.images();
        String release = rec.release();
        List<String> lines = rec.lines();
        Initramfs guest = rec.workloadGuest(false);
        // the recording's definitions (as recorded, offsets filled in), entry probes only
        UprobeParser parser = new UprobeParser(arch, Dialect.forRelease(release), new InitramfsFiles(guest));
        List<UprobeDef> probes = new ArrayList<>();
        for (String l : lines) {
            if (!l.startsWith("#   ")) continue;
            if (parser.parse(l.substring(4)) instanceof UprobeDef d && !d.isReturn()) probes.add(d);
        }
        assertEquals(2, probes.size(), "the recording's entry probes: " + probes);
        List<String> linux = new ArrayList<>();
        for (String l : lines) {
            Matcher m = LINE.matcher(l);
            if (m.find() && probes.stream().anyMatch(p -> p.event().equals(m.group(1)))) linux.add(m.group(1) + " " + m.group(2));
        }
        String start = linux.getFirst();
        assertTrue(start.startsWith("ustart "), start);
        List<String> expected = new ArrayList<>();
        expected.add(start);
        expected.addAll(linux);
        expected.add(start);

        List<String> kpemu = new ArrayList<>();
        Path initrd = Files.createTempFile("kpemu-uprobes", ".cpio");
        try {
            guest.write(initrd);
            BootHooks hooks = new BootHooks() {
                @Override public void ready(LinuxGuest g) {
                    try {
                        var btf = BtfLocator.forGuest(images, arch, g.symbols()).btf();
                        UprobeMappings mappings = new UprobeMappings(g.machine(), btf, g.symbols(), Set.of("/bin/busybox"));
                        new UprobeSites(g.machine(), btf, mappings, probes,
                                h -> kpemu.add(h.probe().event() + " 0x" + Long.toHexString(h.address())));
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
        assertEquals(expected, kpemu);
    }
}
