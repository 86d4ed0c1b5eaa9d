package dev.kpemu.kprobes.fail;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.StringReader;
import java.nio.file.Path;
import java.util.Optional;

import org.junit.jupiter.api.Test;

class ErrorInjectionListTest {

    @Test
    void readsTheRecordedFormat() throws Exception {
        Path ref = Path.of(ErrorInjectionListTest.class.getResource("error-injection").toURI()).getParent();
        ErrorInjectionList l = ErrorInjectionList.recorded(ref, "x86_64", "6.1").orElseThrow();
        assertEquals(Optional.of(ErrorInjectionList.EType.ERRNO), l.type("__x64_sys_openat"));
        assertTrue(l.allows("should_failslab"));
        assertEquals(false, l.allows("kmalloc"));
        assertEquals(3, l.all().size());
        assertEquals(Optional.empty(), ErrorInjectionList.recorded(ref, "arm64", "6.1"), "not recorded");
    }

    @Test
    void malformedLinesNameTheLine() {
        var e = assertThrows(IllegalArgumentException.class,
                () -> ErrorInjectionList.parse(new StringReader("# h\nf ERRNO\ng MAYBE\n"), "x.list"));
        assertEquals("x.list:3: unknown type 'MAYBE' (ERRNO, ERRNO_NULL, NULL, TRUE, FALSE)", e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> ErrorInjectionList.parse(new StringReader("f\n"), "y"));
    }
}
