package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** kpemu boot --fail (fault injection, #29). */
class BootFailTest {

    @ParameterizedTest
    @CsvSource({"x86_64,__x64_sys_openat", "arm64,__arm64_sys_openat"})
    @Tag("kernel")
    void catFailsWithNoSuchFile(String arch, String openat) {
        CliTest.Run r = CliTest.run("boot", "--arch", arch, "--fail", openat + "=-ENOENT,comm=cat,times=1,verbose=1", "--", "cat", "/proc/version");
        assertEquals(ExitCodes.ERROR, r.code(), r.out() + r.err());
        assertTrue(r.err().contains("cat: can't open '/proc/version': No such file or directory"), r.err());
        assertEquals(1, r.err().lines().filter(l -> l.matches("kpemu: fail_function: " + openat + " retval=-2 comm=cat pid=\\d+")).count(), r.err());
        assertTrue(r.err().contains("FAULT_INJECTION: forcing a failure.\nname fail_function, interval 1, probability 100, space 0, times 1\n"), r.err());
    }

    @Test
    void aFunctionOffTheListIsRefusedInOneLineUnlessAllowUnsafe() {
        CliTest.Run r = CliTest.run("boot", "--arch", "x86_64", "--kernel", "debian:bookworm@6.1.0-56", "--fail", "vfs_read=-5", "--", "true");
        assertEquals(ExitCodes.USAGE, r.code(), r.err());
        assertEquals("kpemu: --fail: vfs_read is not on the kernel's error-injection list; --allow-unsafe fails it anyway\n", r.err());
    }

    @Test
    void funcsListsTheErrorInjectableFunctions() {
        CliTest.Run r = CliTest.run("funcs", "--arch", "x86_64", "--kernel", "debian:bookworm@6.1.0-56", "--error-injectable", "__x64_sys_open*");
        assertEquals(ExitCodes.OK, r.code(), r.err());
        assertEquals("__x64_sys_open ERRNO\n__x64_sys_open_by_handle_at ERRNO\n__x64_sys_open_tree ERRNO\n__x64_sys_openat ERRNO\n__x64_sys_openat2 ERRNO\n", r.out());
    }

    @Test
    void aBadSpecIsAOneLineUsageError() {
        CliTest.Run r = CliTest.run("boot", "--arch", "x86_64", "--fail", "__x64_sys_openat=-ENOPE", "--", "true");
        assertEquals(ExitCodes.USAGE, r.code(), r.err());
        assertEquals("kpemu: --fail '__x64_sys_openat=-ENOPE': return value '-ENOPE' is neither a number nor an errno name like -ENOMEM\n", r.err());
    }
}
