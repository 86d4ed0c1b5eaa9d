package dev.kpemu.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.api.Outcome;
import dev.kpemu.api.SessionResult;
import dev.kpemu.machine.Arch;

/**
 * The ported samples, run on Debian's kernels. Expected values come from the kernel's semantics,
 * written by hand: Linux shows an x86 pre handler {@code ip} = probe address + 1 (after the int3)
 * and an arm64 one {@code pc} = the probe address (Documentation/trace/kprobes.rst, the arch
 * handlers); a kprobe with a post handler is never optimized, so every hit runs both handlers;
 * {@code kernel_clone} returns the new task's pid in the parent (kernel/fork.c); each of the
 * command's three background {@code true}s is one fork of the shell; busybox's open is
 * {@code openat(AT_FDCWD, ...)} (AT_FDCWD = -100, include/uapi/linux/fcntl.h); {@code cat} opens
 * O_RDONLY, to which the openat system call adds O_LARGEFILE on a 64-bit kernel (x86-64: 0100000,
 * include/uapi/asm-generic/fcntl.h) and {@code build_open_how} clears the mode without O_CREAT
 * (fs/open.c).
 */
@Tag("kernel")
class ExamplesTest {

    @ParameterizedTest
    @EnumSource(Arch.class)
    void kprobeExamplePrintsTheRegistersBeforeAndAfterEveryFork(Arch arch) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        SessionResult r = KprobeExample.run(arch, new PrintStream(bytes, true, StandardCharsets.UTF_8));
        assertEquals(Outcome.POWERED_OFF, r.outcome(), r.status());
        assertEquals(0, r.commandExit());
        r.assertNoHandlerFailures();
        String out = bytes.toString(StandardCharsets.UTF_8);
        System.out.print(out);
        Pattern pre = Pattern.compile(arch == Arch.X86_64 ? "<kernel_clone> p->addr = 0x(\\p{XDigit}+), ip = (\\p{XDigit}+), flags = 0x\\p{XDigit}+"
                : "<kernel_clone> p->addr = 0x(\\p{XDigit}+), pc = 0x(\\p{XDigit}+), pstate = 0x\\p{XDigit}+");
        int pres = 0, posts = 0;
        for (String line : out.lines().toList()) {
            Matcher m = pre.matcher(line);
            if (m.matches()) {
                pres++;
                long addr = Long.parseUnsignedLong(m.group(1), 16), ip = Long.parseUnsignedLong(m.group(2), 16);
                assertEquals(arch == Arch.X86_64 ? addr + 1 : addr, ip, line);
            } else if (line.matches("<kernel_clone> p->addr = 0x\\p{XDigit}+, (flags|pstate) = 0x\\p{XDigit}+")) {
                posts++;
            }
        }
        assertTrue(pres >= 1, "the shell forks at least once:\n" + out);
        assertEquals(pres, posts, "a post handler runs after every pre handler:\n" + out);
    }

    @Test
    void kretprobeExampleTimesEveryForkWithPerInstanceData() {
        List<KretprobeExample.Call> calls = new ArrayList<>();
        SessionResult r = KretprobeExample.run(Arch.X86_64, System.out, calls);
        assertEquals(Outcome.POWERED_OFF, r.outcome(), r.status());
        r.assertNoHandlerFailures();
        List<KretprobeExample.Call> fromShell = calls.stream().filter(c -> c.comm().equals("sh")).toList();
        assertTrue(fromShell.size() >= 3, "the shell forks once per background command: " + calls);
        for (KretprobeExample.Call c : calls) {
            assertTrue(c.returned() > 1, "kernel_clone returns the child's pid: " + c);
            assertTrue(c.tookNanos() > 0, "a fork takes guest time (the clock is exact to the instruction): " + c);
        }
    }

    @Test
    void typedEntryHandlerGetsTheArgumentsByTheirBtfNames() {
        List<TypedEntryExample.Open> opens = new ArrayList<>();
        SessionResult r = TypedEntryExample.run(Arch.X86_64, System.out, opens, "cat", "/proc/version");
        assertEquals(Outcome.POWERED_OFF, r.outcome(), r.status());
        assertEquals(0, r.commandExit());
        r.assertNoHandlerFailures();
        assertTrue(r.commandOutput().startsWith("Linux version "), r.commandOutput());
        List<TypedEntryExample.Open> byCat = opens.stream().filter(o -> o.args().filename() != null
                && o.args().filename().equals("/proc/version")).toList();
        assertFalse(byCat.isEmpty(), "cat opens its argument: " + opens);
        for (TypedEntryExample.Open o : byCat) {
            assertEquals("cat", o.comm());
            assertEquals(-100, o.args().dfd(), "AT_FDCWD");
            assertEquals(0, o.flags() & 3, "O_RDONLY");
            assertEquals(0100000, o.flags() & 0100000, "openat(2) adds O_LARGEFILE on 64-bit (force_o_largefile)");
            assertEquals(0, o.mode(), "no mode without O_CREAT (build_open_how)");
            assertTrue(o.pid() > 1, o.toString());
        }
    }
}
