package dev.kpemu.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;

/** {@link KpemuSession.Builder#fail} on a booted Debian kernel: cat's openat fails with -ENOENT. */
@Tag("kernel")
class FailSessionTest {

    @ParameterizedTest
    @EnumSource(Arch.class)
    void catsOpenFailsWithNoSuchFile(Arch arch) {
        String openat = arch == Arch.X86_64 ? "__x64_sys_openat" : "__arm64_sys_openat";
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        KpemuSession s = KpemuSession.builder().arch(arch).command("cat", "/proc/version").timeout(Duration.ofSeconds(60))
                .console(console).fail(Fail.on(openat).returning(-2).comm("cat").times(1).verbose(1)).build();
        SessionResult r = s.run();
        assertEquals(Outcome.POWERED_OFF, r.outcome(), r.status());
        assertEquals(1, r.commandExit(), r.commandOutput());
        assertTrue(r.commandOutput().contains("No such file or directory"), r.commandOutput());
        assertEquals(1, s.injections().size());
        assertEquals("cat", s.injections().get(0).comm());
        assertTrue(console.toString(StandardCharsets.UTF_8).contains("FAULT_INJECTION: forcing a failure.\nname fail_function, interval 1, probability 100, space 0, times 1\n"));
    }

    /**
     * nth=2: cat opens its two files in order; the first opens (its text is printed), the second
     * fails. The trace has the injection as a kpemu/fail_function line; verbose=2 adds the Call Trace.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void theSecondCallIsTheOneThatFails(Arch arch) {
        String openat = arch == Arch.X86_64 ? "__x64_sys_openat" : "__arm64_sys_openat";
        ByteArrayOutputStream console = new ByteArrayOutputStream();
        KpemuSession s = KpemuSession.builder().arch(arch).command("cat", "/proc/sys/kernel/ostype", "/proc/sys/kernel/osrelease")
                .timeout(Duration.ofSeconds(60)).console(console).fail(Fail.on(openat).returning(-2).comm("cat").nth(2).verbose(2)).build();
        SessionResult r = s.run();
        assertEquals(Outcome.POWERED_OFF, r.outcome(), r.status());
        assertEquals(1, r.commandExit(), r.commandOutput());
        assertEquals("Linux\ncat: can't open '/proc/sys/kernel/osrelease': No such file or directory\n", r.commandOutput());
        assertEquals(1, s.injections().size());
        assertEquals(1, r.traceLines().size(), r.traceLines().toString());
        assertTrue(r.traceLines().getFirst().matches("\\s+cat-\\d+\\s+\\[000\\] \\S{5}\\s+\\d+\\.\\d{6}: fail_function: \\(" + openat
                + "\\+0x0/0x[0-9a-f]+\\) retval=-2"), r.traceLines().toString());
        String c = console.toString(StandardCharsets.UTF_8);
        assertTrue(c.contains("times 1\nCall Trace:\n " + openat + "+0x0/0x"), c);
    }
}
