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
import dev.kpemu.machine.WatchHit;

/**
 * {@link dev.kpemu.machine.Watchpoints} on Debian's booted x86-64 kernel: a write watch on
 * {@code jiffies}, added at {@code start_kernel} (mid-boot: the engine has translated code and
 * filled its TLB; the kernel's tables translate the address), sees the tick store values one
 * above the old ones, and the boot still reaches power-off with the same console output.
 */
@Tag("kernel")
class WatchpointBootTest {
    @Test
    void aWriteWatchOnJiffiesSeesTheTickAndTheBootPowersOff() throws Exception {
        List<WatchHit> hits = new ArrayList<>();
        long[] symbolPc = new long[2];
        BootHooks hooks = new BootHooks() {
            @Override public void ready(LinuxGuest guest) {
                long jiffies = guest.symbols().address("jiffies");
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
    }
}
