package dev.kpemu.kprobes.events;

import dev.kpemu.kprobes.Errno;
import dev.kpemu.machine.Arch;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static dev.kpemu.kprobes.events.KernelError.*;
import static org.junit.jupiter.api.Assertions.*;

/**
 * Every error of the kernel's list that a kprobe_events write can log, with the caret where
 * the kernel puts it (commands written like the selftests' {@code check_error}: {@code ^}
 * marks the caret and is removed from the command).
 */
class ProbeParserErrorTest {
    static final String LONG65 = "12345678901234567890123456789012345678901234567890123456789012345";

    static String goodReg(Arch a) { return a == Arch.X86_64 ? "%ax" : "%x0"; }

    static ProbeParser parser(Arch a) { return new ProbeParser(a, Dialect.LINUX_6_1, new FakeKernel()); }

    static ProbeParser mainline(Arch a) { return new ProbeParser(a, Dialect.MAINLINE, new FakeKernel()); }

    /** Parses the caret-marked command, expects {@code error} at the caret with {@code errno}. */
    static void check(ProbeParser p, String marked, KernelError error, Errno errno) {
        int caret = marked.indexOf('^');
        assertTrue(caret >= 0, marked);
        String cmd = marked.substring(0, caret) + marked.substring(caret + 1);
        ProbeSyntaxException e = assertThrows(ProbeSyntaxException.class, () -> p.parse(cmd), marked);
        assertEquals(error, e.error(), marked);
        assertEquals(caret, e.position(), marked + "\n" + e.errorLog());
        assertEquals(errno, e.errno(), marked);
        String log = e.errorLog();
        String[] lines = log.split("\n");
        assertEquals("trace_kprobe: error: " + error.message(), lines[0]);
        assertEquals("  Command: " + cmd, lines[1]);
        // the selftests' check: last line length == 13 + pos (with newline)
        assertEquals(13 + caret, lines[2].length() + 1, log);
        assertEquals(" ".repeat(11 + caret) + "^", lines[2]);
    }

    static void check(ProbeParser p, String marked, KernelError error) {
        check(p, marked, error, Errno.EINVAL);
    }

    static Stream<Arguments> selftestErrors() {
        List<Arguments> l = new ArrayList<>();
        String nest = "+0(".repeat(13);
        String[][] t = {
                {"r^1a111 vfs_read", "BAD_MAXACT"},
                {"r^0 vfs_read", "BAD_MAXACT"},
                {"r^0x vfs_read", "BAD_MAXACT"},
                {"r^" + "1".repeat(64) + ":foo vfs_read", "BAD_MAXACT"},
                {"r^100000 vfs_read", "MAXACT_TOO_BIG"},
                {"r^4097:e vfs_read", "MAXACT_TOO_BIG"},
                {"p ^hoge-fuga", "BAD_PROBE_ADDR"},
                {"p ^hoge+1000-1000", "BAD_PROBE_ADDR"},
                {"p ^vfs_read+", "BAD_PROBE_ADDR"},
                {"p ^vfs_read+0x100000000", "BAD_PROBE_ADDR"},
                {"r ^vfs_read+10", "BAD_RETPROBE"},
                {"p ^vfs_read+10%return", "BAD_RETPROBE"},
                {"p vfs_read^%hoge", "BAD_ADDR_SUFFIX"},
                {"p vfs_read+4^%returns", "BAD_ADDR_SUFFIX"},
                {"p:^/bar vfs_read", "NO_GROUP_NAME"},
                {"p:^.bar vfs_read", "NO_GROUP_NAME"},
                {"p:^" + LONG65 + "/bar vfs_read", "GROUP_TOO_LONG"},
                {"p:^foo.1/bar vfs_read", "BAD_GROUP_NAME"},
                {"p:^1foo/bar vfs_read", "BAD_GROUP_NAME"},
                {"p:^ vfs_read", "NO_EVENT_NAME"},
                {"r4:^ vfs_read", "NO_EVENT_NAME"},
                {"p:foo/^" + LONG65 + " vfs_read", "EVENT_TOO_LONG"},
                {"p:foo/^bar.1 vfs_read", "BAD_EVENT_NAME"},
                {"p:foo.^bar-1 vfs_read", "BAD_EVENT_NAME"},
                {"p:^9ev vfs_read", "BAD_EVENT_NAME"},
                {"p vfs_read ^$retval", "RETVAL_ON_PROBE"},
                {"r 0xffffffff81001000 ^$retval", "RETVAL_ON_PROBE"},
                {"p vfs_read ^$stack10000", "BAD_STACK_NUM"},
                {"p vfs_read ^$stack2049", "BAD_STACK_NUM"},
                {"p vfs_read ^$arg10000", "BAD_ARG_NUM"},
                {"p vfs_read ^$arg0", "BAD_ARG_NUM"},
                {"p vfs_read ^$arg2049", "BAD_ARG_NUM"},
                {"p vfs_read ^$none_var", "BAD_VAR"},
                {"p vfs_read ^$stackp", "BAD_VAR"},
                {"p vfs_read ^$stack0+10", "BAD_VAR"},
                {"p vfs_read ^$argx", "BAD_VAR"},
                {"p vfs_read ^$", "BAD_VAR"},
                {"p vfs_read+4 ^$arg1", "BAD_VAR"},
                {"r vfs_read ^$arg1", "BAD_VAR"},
                {"p 0xffffffff81001000 ^$arg1", "BAD_VAR"},
                {"p vfs_read ^%none_reg", "BAD_REG_NAME"},
                {"p vfs_read ^%", "BAD_REG_NAME"},
                {"p vfs_read ^@12345678abcde", "BAD_MEM_ADDR"},
                {"p vfs_read ^@+10", "FILE_ON_KPROBE"},
                {"p vfs_read arg1=\\^x", "BAD_IMM"},
                {"p vfs_read arg1=\\^", "BAD_IMM"},
                {"p vfs_read arg1=\\^+", "BAD_IMM"},
                {"p vfs_read arg1=\\\"abcd^", "IMMSTR_NO_CLOSE"},
                {"p vfs_read ^+0@0)", "DEREF_NEED_BRACE"},
                {"p vfs_read ^+0ab1(@0)", "BAD_DEREF_OFFS"},
                {"p vfs_read ^+(%sp)", "BAD_DEREF_OFFS"},
                {"p vfs_read ^-(%sp)", "BAD_DEREF_OFFS"},
                {"p vfs_read +0(+0(@0^)", "DEREF_OPEN_BRACE"},
                {"p vfs_read +0(^$comm)", "COMM_CANT_DEREF"},
                {"p vfs_read +8(^\\\"abc\")", "COMM_CANT_DEREF"},
                {"p vfs_read ^&1", "BAD_FETCH_ARG"},
                {"p vfs_read ^(%sp)", "BAD_FETCH_ARG"},
                {"p vfs_read +0(^)", "BAD_FETCH_ARG"},
                {"p vfs_read +0(^" + nest + "@0" + ")".repeat(14), "TOO_MANY_OPS"},
                {"p vfs_read +0(@11):u8[10^", "ARRAY_NO_CLOSE"},
                {"p vfs_read +0(@11):u8[10]^a", "BAD_ARRAY_SUFFIX"},
                {"p vfs_read +0(@11):u8[^10a]", "BAD_ARRAY_NUM"},
                {"p vfs_read +0(@11):u8[^0]", "BAD_ARRAY_NUM"},
                {"p vfs_read +0(@11):u8[^]", "BAD_ARRAY_NUM"},
                {"p vfs_read +0(@11):u8[^256]", "ARRAY_TOO_BIG"},
                {"p vfs_read +0(@11):u8[^65]", "ARRAY_TOO_BIG"},
                {"p vfs_read @11:^unknown_type", "BAD_TYPE"},
                {"p vfs_read @11:^", "BAD_TYPE"},
                {"p vfs_read @11:^:x16", "BAD_TYPE"},
                {"p vfs_read @11:^y16", "BAD_TYPE"},
                {"p vfs_read x16:^%ax", "BAD_TYPE"},
                {"p vfs_read @11:^b4@4/12", "BAD_TYPE"},
                {"p vfs_read @11:^b4@4", "BAD_TYPE"},
                {"p vfs_read $stack0:^string", "BAD_STRING"},
                {"p vfs_read $stack:^string", "BAD_STRING"},
                {"p vfs_read $stack1:^x8[8]", "BAD_STRING"},
                {"p vfs_read $stack1:^ustring", "BAD_STRING"},
                {"p vfs_read @11:^b10@a/16", "BAD_BITFIELD"},
                {"p vfs_read @11:^b0@1/8", "BAD_BITFIELD"},
                {"p vfs_read @11:^b4@5/8", "BAD_BITFIELD"},
                {"p vfs_read @11:^b4@/8", "BAD_BITFIELD"},
                {"p vfs_read @11:^bogus/8", "BAD_BITFIELD"},
                {"p vfs_read ^arg123456789012345678901234567890=@11", "ARG_NAME_TOO_LONG"},
                {"p vfs_read ^=@11", "NO_ARG_NAME"},
                {"p vfs_read ^var.1=@11", "BAD_ARG_NAME"},
                {"p vfs_read ^1var=@11", "BAD_ARG_NAME"},
                {"p vfs_read var1=@11 ^var1=@12", "USED_ARG_NAME"},
                {"p vfs_read @11 ^arg1=@12", "USED_ARG_NAME"},
                {"p vfs_read ^__probe_ip=@12", "USED_ARG_NAME"},
                {"p vfs_read ^common_pid=@12", "USED_ARG_NAME"},
                {"p vfs_read ^+1234567(+1234567(+1234567(+1234567(+1234567(+1234567(@1234))))))", "ARG_TOO_LONG"},
                {"p vfs_read arg1=^", "NO_ARG_BODY"},
        };
        for (String[] e : t) l.add(Arguments.of(e[0], KernelError.valueOf(e[1])));
        return l.stream();
    }

    @ParameterizedTest(name = "{0} -> {1}")
    @MethodSource("selftestErrors")
    void kernelErrorAndCaretX86(String marked, KernelError error) {
        check(parser(Arch.X86_64), marked.replace("%sp", goodReg(Arch.X86_64)), error);
    }

    @ParameterizedTest(name = "{0} -> {1}")
    @MethodSource("selftestErrors")
    void kernelErrorAndCaretArm64(String marked, KernelError error) {
        check(parser(Arch.ARM64), marked.replace("%sp", goodReg(Arch.ARM64)), error);
    }

    @Test
    void nonUniqueAndUnknownSymbolsCarryTheirErrno() {
        check(parser(Arch.X86_64), "p ^dup_sym", NON_UNIQ_SYMBOL, Errno.EADDRNOTAVAIL);
        check(parser(Arch.X86_64), "p ^non_exist_func", BAD_PROBE_ADDR, Errno.ENOENT);
        check(parser(Arch.ARM64), "r ^non_exist_func", BAD_PROBE_ADDR, Errno.ENOENT);
        check(parser(Arch.X86_64), "p ^non_exist_func%return", BAD_PROBE_ADDR, Errno.ENOENT);
    }

    @Test
    void maxactiveOnKprobeUsesTheDialectsName() {
        check(parser(Arch.X86_64), "p^100 vfs_read", MAXACT_NO_KPROBE);
        check(mainline(Arch.X86_64), "p^100 vfs_read", BAD_MAXACT_TYPE);
        assertEquals("Maxactive is not for kprobe", MAXACT_NO_KPROBE.message());
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void registerNamesOfTheOtherArchAreRejected(Arch a) {
        List<String> bad = a == Arch.X86_64
                ? List.of("eax", "rax", "ex", "x0", "ds", "es", "fs", "gs", "AX", "pc", "lr")
                : List.of("ax", "w0", "fp", "x31", "x00", "X0", "di", "ip", "flags");
        for (String r : bad) check(parser(a), "p vfs_read ^%" + r, BAD_REG_NAME);
    }

    @Test
    void userDerefCaretIsOffByOneLikeTheKernel() {
        // "+u0(" is 4 bytes but the kernel advances the offset by 3 (it rewrote "+u" in place)
        check(parser(Arch.X86_64), "p vfs_read +u0^(%none)", BAD_REG_NAME);
        check(parser(Arch.X86_64), "p vfs_read -u8^(%none)", BAD_REG_NAME);
        check(parser(Arch.X86_64), "p vfs_read +u0(%a^x", DEREF_OPEN_BRACE);
        check(parser(Arch.X86_64), "p vfs_read +0x10(^%none)", BAD_REG_NAME);
        check(parser(Arch.X86_64), "p vfs_read -16(^%none)", BAD_REG_NAME);
    }

    @Test
    void errorsInLaterArgumentsCountEarlierTokens() {
        check(parser(Arch.X86_64), "p:grp/ev vfs_read a=%ax b=+0(%di):u8 ^=%ax", NO_ARG_NAME);
        check(parser(Arch.X86_64), "p:grp/ev vfs_read a=%ax b=+0(%di):u8 c=^%bogus", BAD_REG_NAME);
    }

    @Test
    void errorLogCarriesTimestampPrefix() throws Exception {
        ProbeSyntaxException e = assertThrows(ProbeSyntaxException.class, () -> parser(Arch.X86_64).parse("p vfs_read %bogus"));
        assertEquals("[   12.345678] trace_kprobe: error: Invalid register name\n"
                + "  Command: p vfs_read %bogus\n"
                + "                      ^\n", e.errorLog(12_345_678_901L));
    }

    @Test
    void commandIsRejoinedWithSingleSpaces() {
        ProbeSyntaxException e = assertThrows(ProbeSyntaxException.class,
                () -> parser(Arch.X86_64).parse("  p \t vfs_read    %bogus   # comment"));
        assertEquals("p vfs_read %bogus", e.command());
        assertEquals(11, e.position());
    }

    @Test
    void silentRejections() {
        ProbeParser p = parser(Arch.X86_64);
        for (String s : List.of("x vfs_read", "p", "p:foo", "r10", "-foo", "-", " -:foo", "-:",
                "p /bin/sh:0x100", "p vfs_read $comm:u32", "p vfs_read $comm:string[2]", "p vfs_read $COMM:x8",
                "p vfs_read \\\"abc\":u8", "p vfs_read \\\"a:b\"", "p vfs_read " + "x".repeat(5000))) {
            ProbeSyntaxException e = assertThrows(ProbeSyntaxException.class, () -> p.parse(s), s);
            assertNull(e.error(), s);
            assertFalse(e.logged());
            assertEquals("", e.errorLog());
            assertEquals(Errno.EINVAL, e.errno(), s);
        }
    }

    @Test
    void mainlineDialectLogsWhatLinux61Swallows() {
        ProbeParser p = mainline(Arch.X86_64);
        check(p, "p vfs_read $comm:^u32", NEED_STRING_TYPE);
        check(p, "p vfs_read $comm:^string[2]", NEED_STRING_TYPE);
        check(p, "p vfs_read \\\"abc\"[2]^", IMMSTR_NO_CLOSE);
        check(p, "p vfs_read+4 ^$arg1", NOFENTRY_ARGS);
        check(p, "p vfs_read \\1:^symstr", BAD_SYMSTRING);
        StringBuilder sb = new StringBuilder("p vfs_read ^");
        for (int i = 0; i < 129; i++) sb.append(i == 0 ? "" : " ").append("\\").append(i);
        check(p, sb.toString(), TOO_MANY_ARGS, Errno.E2BIG);
    }

    @Test
    void everyKprobeErrorIsExercised() {
        // registration-phase errors are produced by the engine through ProbeSyntaxException.registration
        ProbeSyntaxException e = ProbeSyntaxException.registration("p vfs_read+3", 1, 0, BAD_INSN_BNDRY, Errno.EILSEQ);
        assertEquals("trace_kprobe: error: Probe point is not an instruction boundary\n  Command: p vfs_read+3\n"
                + " ".repeat(13) + "^\n", e.errorLog());
        e = ProbeSyntaxException.registration("r:kprobes/testevent do_exit", 0, 0, DIFF_PROBE_TYPE, Errno.EEXIST);
        assertEquals(11, e.errorLog().split("\n")[2].indexOf('^'));
    }
}
