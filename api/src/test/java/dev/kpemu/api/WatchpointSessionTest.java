package dev.kpemu.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.machine.Arch;

/**
 * {@link Watchpoint} through {@link KpemuSession} on Debian's x86-64 kernel: the writes of
 * {@code jiffies} with their old and new values, at the instructions Linux's own writes were
 * recorded at under QEMU's gdbstub ({@code reference/x86_64/6.1/watch-jiffies.trace}: gdb's pc
 * is the instruction after the access, which {@link WatchAccess#ip} reports), the task and CPU;
 * a handler that stops the guest at the tenth write ends the session {@link Outcome#STOPPED}.
 */
@Tag("kernel")
class WatchpointSessionTest {
    @Test
    void jiffiesWritesUntilTheHandlerStopsTheGuest() throws Exception {
        List<WatchAccess> writes = new ArrayList<>();
        KpemuSession s = KpemuSession.builder().arch(Arch.X86_64).timeout(Duration.ofSeconds(60))
                .watch(Watchpoint.on("jiffies", 8).writes().handler(a -> {
                    writes.add(a);
                    if (writes.size() == 10) a.stopGuest();
                })).build();
        SessionResult r = s.run();
        assertEquals(Outcome.STOPPED, r.outcome(), r.status());
        assertTrue(r.status().startsWith("stopped at a watchpoint: write of 8 bytes"), r.status());
        assertEquals(10, writes.size(), "the guest stops at the tenth write");
        assertEquals(List.of(), s.handlerFailures());

        Path ref = Path.of(System.getProperty("user.dir")).resolveSibling("guest-images")
                .resolve("reference/x86_64/6.1/watch-jiffies.trace");
        long refAddress = -1;
        TreeSet<Long> refIps = new TreeSet<>();
        for (String l : Files.readAllLines(ref)) {
            if (l.startsWith("# address: ")) refAddress = Long.parseUnsignedLong(l.substring(11).trim(), 16);
            if (l.startsWith("W ")) refIps.add(Long.parseUnsignedLong(l.split(" ")[1], 16));
        }
        for (WatchAccess a : writes) {
            assertTrue(a.isWrite(), a.toString());
            assertEquals(refAddress, a.address(), "jiffies where Linux has it");
            assertEquals(8, a.size());
            assertTrue(Long.compareUnsigned(a.newValue(), a.oldValue()) > 0, "jiffies rises: " + a);
            assertTrue(refIps.contains(a.ip()), "ip " + Long.toHexString(a.ip()) + " is one of gdb's pcs " + refIps);
            assertTrue(a.ip() > a.pc() && a.ip() - a.pc() <= 15, "the ip is the instruction after the store: " + a);
            assertEquals(0, a.cpu());
            assertTrue(a.comm().equals("swapper/0") && a.pid() == 0 || a.pid() > 0, a.toString());
        }
        for (int i = 1; i < writes.size(); i++) assertEquals(writes.get(i - 1).newValue(), writes.get(i).oldValue(), "one write after the other");
    }

    @Test
    void anUnknownSymbolIsOneLine() {
        KpemuSession s = KpemuSession.builder().arch(Arch.X86_64).timeout(Duration.ofSeconds(60))
                .watch(Watchpoint.on("no_such_variable", 8)).build();
        KpemuException e = assertThrows(KpemuException.class, s::run);
        assertEquals("watchpoint no_such_variable: the kernel's kallsyms has no symbol no_such_variable", e.getMessage());
    }
}
