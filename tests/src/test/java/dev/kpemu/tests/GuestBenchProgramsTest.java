package dev.kpemu.tests;

import static dev.kpemu.tests.KpemuInProcess.kpemu;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.cli.GuestBenchmarks;
import dev.kpemu.machine.Arch;
import dev.kpemu.tests.KpemuInProcess.Run;

/**
 * The guest programs of {@code kpemu bench guest} (guest-images/guest-bench/kbench.c and the busybox
 * loop of GuestBenchmarks.INIT) run to completion under kpemu on Debian's kernel of each arch,
 * in the initramfs and with the command line the bench gives both machines, every benchmark for a
 * few iterations, one after the other in one boot. Not timed. Expected lines written by hand from
 * kbench.c's and the /init's {@code kbench NAME N done}.
 */
@Tag("kernel")
class GuestBenchProgramsTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void everyBenchmarkRunsItsIterationsAndTheGuestPowersOff(Arch arch, @TempDir Path tmp) throws Exception {
        Map<String, Long> runs = new LinkedHashMap<>();
        runs.put("syscall", 1000L);
        runs.put("fault", 20L);
        runs.put("yield", 100L);
        runs.put("forkexec", 5L);
        runs.put("pipe", 100L);
        runs.put("fs", 20L);
        runs.put("busybox", 5L);
        assertEquals(GuestBenchmarks.ALL.stream().map(GuestBenchmarks.Benchmark::name).toList(), List.copyOf(runs.keySet()),
                "every benchmark of the bench is run here");
        Path initramfs = GuestBenchmarks.initramfs(arch);
        Path console = tmp.resolve("console");
        Run r = kpemu("boot", "--arch", arch.linuxName(), "--initrd", initramfs.toString(),
                "--append", GuestBenchmarks.commandLine(arch, runs), "--timeout", "600", "--console", console.toString());
        String text = Files.readString(console, StandardCharsets.ISO_8859_1);
        assertEquals(0, r.code(), r.err() + "\n" + text);
        List<String> done = text.lines().map(String::strip).filter(l -> l.startsWith("kbench ")).toList();
        assertEquals(List.of("kbench syscall 1000 done", "kbench fault 20 done", "kbench yield 100 done", "kbench forkexec 5 done",
                "kbench pipe 100 done", "kbench fs 20 done", "kbench busybox 5 done"), done, text);
        assertTrue(!text.contains("kbench: "), "no failed call: " + text);
    }
}
