package dev.kpemu.boot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.machine.Arch;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.TreeSet;
import dev.kpemu.machine.WatchHit;

/**
 * {@link dev.kpemu.machine.Watchpoints} on Debian's booted x86-64 kernel: a write watch on
 * {@code jiffies}, added at {@code start_kernel} (mid-boot: the engine has translated code and
 * filled its TLB; the kernel's tables translate the address), against Linux's own writes of it
 * recorded under QEMU's gdbstub ({@code guest-images/record-watch.sh x86_64}: the same kernel and
 * initramfs, {@code reference/x86_64/6.1/watch-jiffies.trace}): the same variable address, the
 * same writing instructions, the same first value, every value above the one before; the boot
 * still reaches power-off. The number of writes is not compared: it is the number of ticks, which
 * QEMU takes from the host's clock.
 */
@Tag("kernel")
class WatchpointBootTest {
    @Test
    void aWriteWatchOnJiffiesSeesTheTickAndTheBootPowersOff() throws Exception {
        List<WatchHit> hits = new ArrayList<>();
        long[] symbolPc = new long[2], jiffiesVa = new long[1];
        BootHooks hooks = new BootHooks() {
            @Override public void ready(LinuxGuest guest) {
                long jiffies = guest.symbols().address("jiffies");
                jiffiesVa[0] = jiffies;
                var tick = guest.symbols().byName("tick_do_update_jiffies64").orElseThrow();
                symbolPc[0] = tick.address();
                symbolPc[1] = tick.address() + tick.size();
                guest.machine().addBreakpoint(guest.symbols().address("start_kernel"), (m, at) -> {
                    m.watchpoints().add(m.translateOrThrow(jiffies).physical(), 8, false, true, hits::add);
                    return true;
                });
            }
        };
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        BootRunner.Result r = BootRunner.boot(new BootRunner.Options(Arch.X86_64, null, null, null, 256, 60, console,
                new PrintStream(new ByteArrayOutputStream())), hooks);
        String log = console.toString(StandardCharsets.ISO_8859_1);
        assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status() + "\n" + log.substring(Math.max(0, log.length() - 3000)));
        assertTrue(log.contains(dev.kpemu.image.Initramfs.MARK_DONE), "the workload ran");
        assertTrue(hits.size() > 100, "jiffies writes: " + hits.size());
        long fromTick = 0;
        List<String> notIncreasing = new ArrayList<>();
        for (WatchHit h : hits) {
            assertTrue(h.write());
            assertEquals(8, h.size());
            // NO_HZ: the tick adds every tick missed while idle, so a write adds one or more
            if (Long.compareUnsigned(h.newValue(), h.oldValue()) <= 0)
                notIncreasing.add(Long.toHexString(h.pc()) + ": " + h.oldValue() + " -> " + h.newValue());
            if (h.pc() >= symbolPc[0] && h.pc() < symbolPc[1]) fromTick++;
        }
        assertEquals(List.of(), notIncreasing, "every write of jiffies increases it");
        assertTrue(fromTick > hits.size() / 2, fromTick + " of " + hits.size() + " writes by tick_do_update_jiffies64");

        Path ref = Path.of(System.getProperty("user.dir")).resolveSibling("guest-images")
                .resolve("reference/x86_64/6.1/watch-jiffies.trace");
        List<String> lines = Files.readAllLines(ref);
        String refRelease = lines.stream().filter(l -> l.startsWith("# kernel: ")).findFirst().orElseThrow().split(" ")[2];
        org.junit.jupiter.api.Assumptions.assumeTrue(log.contains("Linux version " + refRelease + " "),
                "the reference was recorded on " + refRelease + ", not the booted kernel");
        long refAddress = -1, refFirst = -1;
        TreeSet<Long> refIps = new TreeSet<>();
        for (String l : lines) {
            if (l.startsWith("# address: ")) refAddress = Long.parseUnsignedLong(l.substring(11).trim(), 16);
            if (!l.startsWith("W ")) continue;
            String[] f = l.split(" ");
            refIps.add(Long.parseUnsignedLong(f[1], 16));
            if (refFirst < 0) refFirst = Long.parseLong(f[2]);
        }
        assertEquals(refAddress, jiffiesVa[0], "jiffies where Linux has it");
        assertEquals(refFirst, hits.getFirst().newValue(), "the first write's value");
        // x86 reports a data breakpoint after the access: each recorded ip is the instruction after one kpemu reports
        TreeSet<Long> pcs = new TreeSet<>();
        for (WatchHit h : hits) pcs.add(h.pc());
        assertEquals(refIps.size(), pcs.size(), "writing instructions: Linux " + hex(refIps) + ", kpemu " + hex(pcs));
        for (long pc : pcs) {
            Long after = refIps.higher(pc);
            assertTrue(after != null && after - pc <= 15 && (refIps.lower(pc + 1) == null || refIps.lower(pc + 1) < pc),
                    "kpemu's writing instruction " + Long.toHexString(pc) + " is the one before Linux's " + hex(refIps));
        }
    }

    private static List<String> hex(java.util.Collection<Long> v) { return v.stream().map(Long::toHexString).toList(); }
}
