package dev.kpemu.kprobes.fail;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class FailSpecTest {

    @Test
    void retvalIsDecimalHexOrAnErrnoName() {
        assertEquals(-2, FailSpec.parse("__x64_sys_openat=-ENOENT").retval());
        assertEquals(12, FailSpec.parse("f=ENOMEM").retval());
        assertEquals(-133, FailSpec.parse("f=-EHWPOISON").retval());
        assertEquals(-11, FailSpec.parse("f=-EWOULDBLOCK").retval());
        assertEquals(0, FailSpec.parse("should_failslab=0").retval());
        assertEquals(-1, FailSpec.parse("f=-1").retval());
        assertEquals(0xffL, FailSpec.parse("f=0xff").retval());
        assertEquals(-0x10L, FailSpec.parse("f=-0x10").retval());
    }

    @Test
    void optionsAreKeptInOrderAndFormatBack() {
        FailSpec s = FailSpec.parse("__x64_sys_openat=-ENOENT,comm=cat,times=1,nth=2");
        assertEquals("__x64_sys_openat", s.function());
        assertEquals("__x64_sys_openat=-2,comm=cat,times=1,nth=2", s.format());
        assertEquals(s, FailSpec.parse(s.format()), "format parses back to the same spec");
    }

    @Test
    void badSpecsAreOneLineErrors() {
        for (String bad : new String[] {"nofunc", "=1", "f=", "f=-ENOTANERRNO", "f=1,bogus=2", "f=1,nth", "f=1,nth=0",
                "f=1,probability=101", "f=1,times=-2", "f=1,verbose=3", "f=1,pid=x", "f=1,times=1,times=2", "1f=2",
                "f=1,after=exec", "f=1,tree=88,after=fork"}) {
            var e = assertThrows(IllegalArgumentException.class, () -> FailSpec.parse(bad), bad);
            assertEquals(false, e.getMessage().contains("\n"), e.getMessage());
        }
    }
}
