package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.kprobes.Errno;
import dev.kpemu.machine.Arch;

/**
 * {@code w:} events in linux-next's wprobe syntax (Documentation/trace/wprobetrace.rst,
 * {@code trace_wprobe.c}'s {@code parse_address_spec} and {@code trace_wprobe_show}), accepted on
 * every dialect as kpemu's extension: defaults, listing, {@code $addr}, and the errors Linux logs,
 * with the caret where its {@code trace_probe_log_err} puts it.
 */
class WprobeParserTest {
    static WprobeDef parse(Dialect d, String cmd) throws ProbeSyntaxException {
        return assertInstanceOf(WprobeDef.class, new ProbeParser(Arch.X86_64, d, new FakeKernel()).parse(cmd));
    }

    @ParameterizedTest
    @EnumSource(Dialect.class)
    void theDocumentsExampleOnEveryDialect(Dialect d) throws Exception {
        WprobeDef w = parse(d, "w:my_jiffies w@jiffies");
        assertEquals("wprobes", w.group());
        assertEquals("my_jiffies", w.event());
        assertTrue(w.writes());
        assertFalse(w.reads());
        assertEquals(4, w.length(), "HW_BREAKPOINT_LEN_4 when no length is given");
        assertEquals(FakeKernel.KBASE + 0x200000, w.address());
        assertEquals("w:wprobes/my_jiffies w@jiffies:4", w.listing());
    }

    @Test
    void defaultsGroupsOffsetsAndAddresses() throws Exception {
        WprobeDef w = parse(Dialect.LINUX_6_1, "w @jiffies+8:8 v=+0($addr):u64 a=$addr");
        assertEquals("jiffies", w.event(), "named after the symbol");
        assertTrue(w.reads() && w.writes(), "rw when the type is omitted");
        assertEquals(FakeKernel.KBASE + 0x200008, w.address());
        assertEquals("w:wprobes/jiffies rw@jiffies+8:8 v=+0($addr):u64 a=$addr", w.listing());
        assertInstanceOf(FetchExpr.WatchAddress.class, w.args().get(1).expr());

        WprobeDef a = parse(Dialect.LINUX_6_1, "w:grp/ r@0xffffffff81200010:2");
        assertEquals("grp", a.group());
        assertEquals("w_0xffffffff81200010", a.event());
        assertEquals("w:grp/w_0xffffffff81200010 r@0xffffffff81200010:2", a.listing());

        WprobeDef m = parse(Dialect.LINUX_6_1, "w:big rw@jiffies-16:4096");
        assertEquals(4096, m.length(), "kpemu's extension: any length");
        assertEquals("w:wprobes/big rw@jiffies-16:4096", m.listing());
    }

    @Test
    void addrIsOnlyAWprobeVariable() {
        ProbeSyntaxException e = assertThrows(ProbeSyntaxException.class,
                () -> new ProbeParser(Arch.X86_64, Dialect.LINUX_6_1, new FakeKernel()).parse("p:k vfs_read a=$addr"));
        assertEquals(KernelError.BAD_VAR, e.error());
    }

    @Test
    void errorsWithTheKernelsCaret() {
        check("w:e ^jiffies", KernelError.BAD_ACCESS_FMT, Errno.EINVAL);
        check("w:e ^x@jiffies", KernelError.BAD_ACCESS_TYPE, Errno.EINVAL);
        check("w:e w@jiffies:^0", KernelError.BAD_ACCESS_LEN, Errno.EINVAL);
        check("w:e w@jiffies:^zz", KernelError.BAD_ACCESS_LEN, Errno.EINVAL);
        check("w:e w@^no_such_variable", KernelError.BAD_ACCESS_ADDR, Errno.ENOENT);
        check("w:e w@^jiffies+2:4", KernelError.BAD_ACCESS_ADDR, Errno.EINVAL);   // a Linux length, unaligned
        check("w^x:e w@jiffies", KernelError.BAD_MAXACT_TYPE, Errno.EINVAL);
        check("w:e w@jiffies ^$retval", KernelError.RETVAL_ON_PROBE, Errno.EINVAL);
    }

    /** {@code ^} marks the caret; the entry is {@code wprobe}'s ({@code trace_probe_log_init("wprobe", ...)}). */
    static void check(String marked, KernelError error, Errno errno) {
        int caret = marked.indexOf('^');
        String cmd = marked.substring(0, caret) + marked.substring(caret + 1);
        ProbeSyntaxException e = assertThrows(ProbeSyntaxException.class,
                () -> new ProbeParser(Arch.X86_64, Dialect.LINUX_6_1, new FakeKernel()).parse(cmd), marked);
        assertEquals(error, e.error(), marked);
        assertEquals(errno, e.errno(), marked);
        assertEquals(caret, e.position(), marked + "\n" + e.errorLog());
        assertTrue(e.errorLog().startsWith("wprobe: error: " + error.message() + "\n"), e.errorLog());
    }
}
