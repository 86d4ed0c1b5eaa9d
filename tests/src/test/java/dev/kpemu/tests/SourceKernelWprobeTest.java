package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;

/**
 * Issue 28 on the source-built kernels ({@link SourceKernelTest#built}): a {@code w:} event on
 * {@code jiffies} resolved through {@code --system-map} (the build's System.map, {@code nm -n
 * vmlinux} as Linux's scripts/mksysmap writes it; Debian's arm64 kallsyms has no data symbols)
 * against Linux's own writes of {@code jiffies} recorded now under QEMU's gdbstub
 * ({@code guest-images/record-watch.sh --kernel IMAGE --system-map MAP --hits 120}, a write
 * watchpoint through the first 120 writes). For every write both saw (the same value after the
 * write: jiffies counts every tick once), the instruction is the same: kpemu's ip is gdb's pc on
 * x86-64 (x86 data breakpoints trap after the access), and on arm64 the instruction before gdb's pc
 * (QEMU's gdbstub stops after the access on both arches; arm64's watchpoint exception, as Linux's
 * hw_breakpoint sees it, is taken at the accessing instruction, which kpemu reports). kpemu's
 * fetched value is the new one on x86-64 and the old one on arm64 (its handler runs before the
 * store, as arm64's exception): jiffies, one store of +1 at one instruction, cannot tell the
 * value rules apart from gdb's output, only check them consistent.
 */
@Tag("source-kernel")
class SourceKernelWprobeTest {
    static final int HITS = 120;
    static final Pattern RECORD = Pattern.compile(
            ".*\\bjw: \\((\\w+)\\+0x([0-9a-f]+)/0x[0-9a-f]+\\) value=(\\d+) addr=0x([0-9a-f]+)$");

    @ParameterizedTest
    @EnumSource(Arch.class)
    void jiffiesWritesAtTheInstructionsGdbReports(Arch arch) throws Exception {
        SourceKernelTest.Built k = SourceKernelTest.built(arch);
        Path dir = SourceKernelTest.WORK.resolve("wprobe/" + arch.linuxName());
        Files.createDirectories(dir);
        Path map = dir.resolve("System.map");
        Process nm = new ProcessBuilder("nm", "-n", k.vmlinux().toString()).redirectOutput(map.toFile())
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        assertEquals(0, nm.waitFor(), "nm -n " + k.vmlinux());
        Map<String, Long> symbols = new HashMap<>();
        for (String l : Files.readAllLines(map)) {
            String[] f = l.split(" ");
            if (f.length == 3) symbols.putIfAbsent(f[2], Long.parseUnsignedLong(f[0], 16));
        }
        long jiffies = symbols.get("jiffies");

        // Linux's writes under QEMU's gdbstub: value after the write -> the pc gdb reported
        Path ref = dir.resolve("watch-jiffies.trace");
        Files.deleteIfExists(ref);
        Path log = dir.resolve("record-watch.log");
        SourceKernelTest.Run rec = SourceKernelTest.run(List.of("bash",
                SourceKernelTest.ROOT.resolve("guest-images/record-watch.sh").toString(),
                "--kernel", k.image().toString(), "--system-map", map.toString(), "--hits", Integer.toString(HITS),
                "--out", ref.toString(), arch.linuxName(), "jiffies"), log, Map.of(), 1800);
        assertEquals(0, rec.exit(), () -> "record-watch.sh failed:\n" + SourceKernelTest.tail(log));
        List<String> recorded = Files.readAllLines(ref, StandardCharsets.ISO_8859_1);
        assertTrue(recorded.contains("# address: " + Long.toHexString(jiffies)), "gdb watched jiffies of the System.map");
        Map<Long, Long> gdbPc = new LinkedHashMap<>();
        for (String l : recorded) {
            if (!l.startsWith("W ")) continue;
            String[] f = l.split(" ");
            gdbPc.put(Long.parseUnsignedLong(f[2]), Long.parseUnsignedLong(f[1], 16));
        }
        assertEquals(HITS, gdbPc.size(), "gdb saw " + HITS + " writes, each with its own value");

        Path trace = dir.resolve("kpemu.trace");
        KpemuInProcess.Run r = KpemuInProcess.kpemu("boot", "--arch", arch.linuxName(), "--kernel", k.image().toString(),
                "--system-map", map.toString(), "--append", "nokaslr panic=-1", "--timeout", "300",
                "-e", "w:jw w@jiffies:8 value=+0($addr):u64 addr=$addr:x64", "-o", trace.toString());
        assertEquals(0, r.code(), () -> "kpemu boot: " + r.err());
        int compared = 0;
        long previous = -1;
        for (String l : Files.readAllLines(trace, StandardCharsets.ISO_8859_1)) {
            Matcher m = RECORD.matcher(l);
            if (!m.matches()) continue;
            long ip = symbols.get(m.group(1)) + Long.parseLong(m.group(2), 16);
            long value = Long.parseUnsignedLong(m.group(3));
            assertEquals(jiffies, Long.parseUnsignedLong(m.group(4), 16), "$addr is jiffies: " + l);
            if (previous != -1) assertEquals(previous + 1, value, "jiffies counts every tick once: " + l);
            previous = value;
            // the write this record reports: x86-64's handler runs after the store (the value is
            // the new one, gdb's), arm64's before it (the value is the old one: the write made value + 1)
            Long pc = gdbPc.get(arch == Arch.X86_64 ? value : value + 1);
            if (pc == null) continue;
            long expected = arch == Arch.X86_64 ? pc : pc - 4;
            assertEquals(Long.toHexString(expected), Long.toHexString(ip),
                    "the write reported with jiffies " + value + ": gdb's pc " + Long.toHexString(pc) + ", kpemu's " + l);
            compared++;
        }
        assertTrue(compared >= 50, "kpemu's records and gdb's first " + HITS + " writes overlap in " + compared + " writes (>= 50)");
    }
}
