package dev.kpemu.kprobes.events;

import dev.kpemu.kprobes.Errno;
import dev.kpemu.machine.Arch;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The event engine on bare-metal guests of both architectures: definitions become probes whose
 * hits print the lines written here by hand from the values the test put in registers and
 * guest memory.
 */
class EventEngineTest {
    private static boolean x86(GuestKernel k) { return k.arch == Arch.X86_64; }

    /** Return site of kprobe_target when called from rel32_call (x86: push, mov, call = 9 bytes) / bl_func (arm64: stp, mov, bl). */
    private static String caller(GuestKernel k) { return x86(k) ? "rel32_call+0x9/0x100" : "bl_func+0xc/0x100"; }

    private static String callerFn(GuestKernel k) { return x86(k) ? "rel32_call" : "bl_func"; }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void registersWithTypes(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            k.write("p:regs kprobe_target a=R0 b=R1:u32 c=R2:s64 d=R3:x16 e=R0:s8 f=R2:u8");
            k.engine.enable("regs");
            assertEquals(0x1234 / 3, k.call("kprobe_target", 0x1234, 0xffff_ffff_0000_0007L, -5, 0xabcd));
            assertEquals(List.of("regs: (kprobe_target+0x0/0x100) a=0x1234 b=7 c=-5 d=0xabcd e=52 f=251"), k.bodies());
        }
    }

    /**
     * A writer formats a record's line straight into its batch ({@link TraceRecord#appendLine}, the
     * body not made into a string): the same characters as {@link TraceRecord#line()}, for kprobes
     * and kretprobes, hex, signed, unsigned and string values.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void aLineAppendedInPlaceIsTheRecordsLine(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            k.engine.output(null);              // nothing formats the records before the test does
            k.writeString(k.data, "caf\u00e9");
            k.write("p:e kprobe_target a=R0 b=R1:u32 c=R2:s64 d=R3:x16 s=+0(R0):string");
            k.write("r:r kprobe_target rv=$retval:x64");
            k.engine.enableAll();
            k.call("kprobe_target", k.data, 7, -5, 0xabcd);
            assertEquals(2, k.records.size());
            for (TraceRecord r : k.records) {
                String inPlace = r.appendLine(new LineBytes(2).text("> ")).toText();
                assertEquals("> " + r.line(), inPlace);
            }
            assertTrue(k.records.getFirst().line().endsWith(" b=7 c=-5 d=0xabcd s=\"caf\u00e9\""), k.records.getFirst().line());
        }
    }

    /** "café", a byte that is not UTF-8, NUL. */
    private static final byte[] GUEST_BYTES = {'c', 'a', 'f', (byte) 0xc3, (byte) 0xa9, (byte) 0xff, 0};

    /**
     * While every listener takes lines ({@link EventEngine.LineListener}), events without trigger
     * or filter come as their lines, byte for byte the lines of the records the same hits make
     * otherwise; a filtered event still comes as a record.
     */
    @ParameterizedTest
    @EnumSource(Arch.class)
    void linesHandedOverAreTheRecordsLines(Arch a) throws Exception {
        String[] defs = {"p:e kprobe_target a=R0 b=R1:u32 c=R2:s64 d=R3:x16 s=+0(R0):string u=R1:u64 x=R1:x8",
                "r:r kprobe_target rv=$retval:x64", "p:f kprobe_target n=R1:s32"};
        List<String> want = new ArrayList<>();
        try (GuestKernel k = new GuestKernel(a)) {
            k.machine.writeVirtual(k.data, GUEST_BYTES);
            for (String d : defs) k.write(d);
            k.engine.enableAll();
            k.call("kprobe_target", k.data, -7, -5, 0xabcd);
            for (TraceRecord r : k.records) want.add(GuestText.decode(r.lineBytes()));
        }
        List<String> lines = new ArrayList<>(), recordLines = new ArrayList<>();
        try (GuestKernel k = new GuestKernel(a)) {
            k.engine.removeListener(k.recordsListener);
            k.engine.addListener(new EventEngine.LineListener() {
                @Override public void accept(TraceRecord r) { recordLines.add(r.line()); lines.add(r.line()); }
                @Override public void acceptLine(LineBytes line) { lines.add(line.toText()); }
            });
            k.machine.writeVirtual(k.data, GUEST_BYTES);
            for (String d : defs) k.write(d);
            k.engine.enableAll();
            k.engine.setFilter("kprobes/f", "n < 0");
            k.call("kprobe_target", k.data, -7, -5, 0xabcd);
        }
        assertEquals(3, want.size());
        assertEquals(want, lines);
        assertEquals(want.stream().filter(l -> l.contains(" f: (")).toList(), recordLines, "the filtered event's record");
        String e = want.stream().filter(l -> l.contains(" e: (")).findFirst().orElseThrow();
        assertTrue(e.endsWith(" s=\"caf\u00e9\udcff\" u=18446744073709551609 x=0xf9"), e);
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void argumentsOnFunctionEntry(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            k.write("p:args kprobe_target $arg1 $arg2:s32 third=$arg3:u8 fourth=$arg4:x8");
            k.engine.enable("kprobes/args");
            k.call("kprobe_target", 0x10, -2, 0x1ff, 0x1234);
            assertEquals(List.of("args: (kprobe_target+0x0/0x100) arg1=0x10 arg2=-2 third=255 fourth=0x34"), k.bodies());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void returnValueAndRealReturnSite(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            k.write("r:ret kprobe_target rv=$retval:u64 raw=$retval");
            k.write("p:ret2 kprobe_target%return rv=$retval:s32");
            k.engine.enableAll();
            assertEquals(110, k.call(callerFn(k), 30));
            List<TraceRecord> recs = List.copyOf(k.records);
            // newest registered first: both are kretprobes on one function, returning together
            assertEquals(List.of("ret2: (" + caller(k) + " <- kprobe_target) rv=10",
                    "ret: (" + caller(k) + " <- kprobe_target) rv=10 raw=0xa").stream().sorted().toList(),
                    k.bodies().stream().sorted().toList());
            assertEquals(k.sym("kprobe_target"), recs.getFirst().ip());
            assertEquals(k.sym(callerFn(k)) + (x86(k) ? 9 : 12), recs.getFirst().retIp());
            assertTrue(recs.getFirst().isReturn());
            // guest time inside one run: the return comes after the entry
            k.write("p:entry kprobe_target");
            k.engine.enable("entry");
            k.records.clear();
            k.call(callerFn(k), 30);
            assertEquals(3, k.records.size());
            assertEquals("entry", k.records.getFirst().event());
            assertTrue(k.records.get(1).context().timestampNanos() > k.records.getFirst().context().timestampNanos());
            k.engine.disable("entry");
            k.write("-:entry");
            assertEquals("r10:kprobes/ret kprobe_target rv=$retval:u64 raw=$retval\n"
                    + "r10:kprobes/ret2 kprobe_target rv=$retval:s32\n", k.engine.listing());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void stackEntriesAndStackPointer(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            if (x86(k)) {
                // at kprobe_target's entry: [rsp] = the return into rel32_call; rsp = top - 8 (halt) - 8 (rbp) - 8 (call)
                k.write("p:stk kprobe_target s0=$stack0:symbol sp=$stack s1=$stack1");
                k.engine.enable("stk");
                k.call("rel32_call", 1);
                assertEquals(List.of("stk: (kprobe_target+0x0/0x100) s0=rel32_call+0x9/0x100 sp=0xffffffff8007ffe8 s1=0x0"),
                        k.bodies());
            } else {
                // bl_func pushed {x29 = 0, x30 = halt_stub}: sp = top - 16
                k.write("p:stk kprobe_target s0=$stack0 s1=$stack1:symbol sp=$stack");
                k.engine.enable("stk");
                k.call("bl_func", 1);
                assertEquals(List.of("stk: (kprobe_target+0x0/0x100) s0=0x0 s1=halt_stub+0x0/0x100 sp=0xffff00000007fff0"),
                        k.bodies());
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void commPidAndContextColumns(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            k.write("p:cm kprobe_target comm=$comm c2=$COMM:string");
            k.engine.enable("cm");
            k.setInterruptsMasked(true);
            k.call("kprobe_target", 3);
            k.setInterruptsMasked(false);
            k.call("kprobe_target", 3);
            List<String> lines = k.lines();
            assertEquals(2, lines.size());
            String body = "cm: (kprobe_target+0x0/0x100) comm=\"kpemu-test\" c2=\"kpemu-test\"";
            assertTrue(lines.get(0).matches("      kpemu-test-42      \\[000\\] d\\.\\.\\.\\. +\\d+\\.\\d{6}: " + java.util.regex.Pattern.quote(body)),
                    lines.get(0));
            assertTrue(lines.get(1).matches("      kpemu-test-42      \\[000\\] \\.\\.\\.\\.\\. +\\d+\\.\\d{6}: " + java.util.regex.Pattern.quote(body)),
                    lines.get(1));
            TraceContext c0 = k.records.get(0).context(), c1 = k.records.get(1).context();
            assertEquals("kpemu-test", c0.comm());
            assertEquals(42, c0.pid());
            assertTrue(c1.timestampNanos() > c0.timestampNanos(), "guest time advances between hits");
            assertEquals(k.records.get(1).line(), lines.get(1));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void nestedDereferences(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            long d = k.data + 0x100, p2 = k.data + 0x200;
            k.writeLong(d, p2);
            k.writeLong(d + 16, k.data + 0x308);
            k.writeLong(p2, 0x4321);
            k.writeLong(p2 + 8, 0x1122334455667788L);
            k.writeLong(k.data + 0x300, 0xdeadbeefL);
            long unmapped = x86(k) ? 0xffff_ffff_c000_0000L : 0xffff_0000_4000_0000L;
            k.write("p:deref kprobe_target v=+8(+0(R1)):u64 w=-8(+16(R1)):x32 u=+0(+0(R1)):u16 f=+8(+0(R3)):u64 g=+0(R3):x8");
            k.engine.enable("deref");
            k.call("kprobe_target", 0, d, 0, unmapped);
            assertEquals(List.of("deref: (kprobe_target+0x0/0x100) v=1234605616436508552 w=0xdeadbeef u=17185 f=0 g=0x0"),
                    k.bodies());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void kernelAndUserStrings(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            long ks = k.data + 0x400;
            k.writeString(ks, "hello kernel");
            k.writeUserString(GuestKernel.USER, "/tmp/user file");
            long across = GuestKernel.USER + 0x1000 - 5;                 // crosses a 4 KiB page boundary
            k.writeUserString(across, "abcdefghij");
            k.write("p:str kprobe_target s=+0(R0):string u=+0(R1):ustring ks=+0(R0):ustring uk=+0(R1):string x=+0(R2):ustring");
            k.engine.enable("str");
            k.call("kprobe_target", ks, GuestKernel.USER, across);
            // a kernel string fetch of a user address reads user memory (probe_mem_read's fallback below
            // TASK_SIZE; recorded: reference/*/6.1/fidelity.trace, k=+0(%si):string prints the user's path)
            assertEquals(List.of("str: (kprobe_target+0x0/0x100) s=\"hello kernel\" u=\"/tmp/user file\" ks=(fault) uk=\"/tmp/user file\" x=\"abcdefghij\""),
                    k.bodies());

            // unmapped user page; a user address through +u deref; a page the kernel maps without EL0 access
            k.writeUserString(GuestKernel.USER_NOEL0, "kernel-only page");
            k.writeLong(k.data + 0x500, GuestKernel.USER);
            k.write("p:ustr2 kprobe_target a=+0(R0):ustring b=+0(R1):ustring c=+u0(R2):u32 n=+0(+0(R3)):ustring");
            k.engine.disable("str");
            k.engine.enable("ustr2");
            k.call("kprobe_target", GuestKernel.USER_UNMAPPED, GuestKernel.USER_NOEL0, GuestKernel.USER, k.data + 0x500);
            // x86-64 does not check the U/S bit for kernel uaccess; arm64's LDTR needs EL0 access
            String b = x86(k) ? "\"kernel-only page\"" : "(fault)";
            assertEquals(List.of("ustr2: (kprobe_target+0x0/0x100) a=(fault) b=" + b + " c=1886221359 n=\"/tmp/user file\""), k.bodies());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void bitfieldsArraysAndCharacters(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a, Dialect.MAINLINE)) {
            long v = k.data + 0x600, ptrs = k.data + 0x640;
            k.writeInt(v, 0x12ab);
            k.writeString(k.data + 0x680, "one");
            k.writeString(k.data + 0x690, "two");
            k.writeLong(ptrs, k.data + 0x680);
            k.writeLong(ptrs + 8, k.data + 0x690);
            k.write("p:bf kprobe_target lo=+0(R0):b4@0/8 hi=+0(R0):b4@4/8 mid=+0(R0):b3@5/32 ch=+1(R0):char");
            k.write("p:arr kprobe_target a=+0(R0):u8[4] b=+0(R0):x16[2] d=+0(R0):s8[3] c=+0(R1):string[2]");
            k.engine.enableAll();
            k.machine.writeVirtual(v, new byte[] {(byte) 0xab, 0x4b, (byte) 0xff, 4});
            k.call("kprobe_target", v, ptrs);
            // 0x04ff4bab: lo = 0xb, hi = 0xa, mid = (0x04ff4bab >> 5) & 7 = 5; byte 1 = 'K'
            assertEquals(List.of("arr: (kprobe_target+0x0/0x100) a={171,75,255,4} b={0x4bab,0x4ff} d={-85,75,-1} c={\"one\",\"two\"}",
                    "bf: (kprobe_target+0x0/0x100) lo=11 hi=10 mid=5 ch='K'"), k.bodies());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void symbolsImmediatesAndDataSymbols(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            k.writeLong(k.data + 8, 0x0123456789abcdefL);
            k.write("p:misc kprobe_target fn=R0:symbol imm=\\0x2a:u32 g=@test_data+8:x64 s=\\\"text\":string bad=R1:symbol");
            k.engine.enable("misc");
            k.call("kprobe_target", k.sym("kprobe_target2") + 0x10, 0x1234);
            assertEquals(List.of("misc: (kprobe_target+0x0/0x100) fn=kprobe_target2+0x10/0x100 imm=42 g=0x123456789abcdef s=\"text\" bad=0x1234"),
                    k.bodies());
        }
        try (GuestKernel k = new GuestKernel(a, Dialect.MAINLINE)) {
            k.write("p:ss kprobe_target s=R0:symstr");
            k.engine.enable("ss");
            k.call("kprobe_target", k.sym("halt_stub") + 4);
            assertEquals(List.of("ss: (kprobe_target+0x0/0x100) s=\"halt_stub+0x4/0x100\""), k.bodies());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void profileCountsHitsAndMisses(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            k.write("p:cnt kprobe_target\np:off kprobe_target2\nr1:rec recurse");
            assertEquals(TraceFormatter.profileLine("cnt", 0, 0) + "\n" + TraceFormatter.profileLine("off", 0, 0) + "\n"
                    + TraceFormatter.profileLine("rec", 0, 0) + "\n", k.engine.profile());
            k.engine.enable("cnt");
            k.engine.enable("rec");
            for (int i = 0; i < 3; i++) k.call("kprobe_target", i);
            k.call("kprobe_target2", 1);
            assertEquals(3, k.call("recurse", 3));          // four nested calls, one instance: three misses
            String pad = " ".repeat(41 + 1 + 14);                 // %-44s, space, %15lu for one-digit counts
            assertEquals("  cnt" + pad + "3" + " ".repeat(15) + "0\n"
                    + "  off" + pad + "0" + " ".repeat(15) + "0\n"
                    + "  rec" + pad + "1" + " ".repeat(15) + "3\n", k.engine.profile());
            assertEquals(3, k.engine.hits("cnt"));
            assertEquals(3, k.engine.misses("rec"));
            assertEquals(4, k.records.size());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void deleteRemovesTheProbe(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            k.write("p:gone kprobe_target x=R0");
            k.engine.enable("gone");
            ProbeSyntaxException busy = assertThrows(ProbeSyntaxException.class, () -> k.write("-:gone"));
            assertEquals(Errno.EBUSY, busy.errno());
            assertFalse(busy.logged());
            k.engine.disable("gone");
            assertFalse(k.kprobes.probesAt(k.sym("kprobe_target")).isEmpty());
            k.write("-:kprobes/gone");
            assertTrue(k.kprobes.probesAt(k.sym("kprobe_target")).isEmpty());
            assertFalse(k.kprobes.isArmed(k.sym("kprobe_target")));
            assertEquals("", k.engine.listing());
            assertEquals(Errno.ENOENT, assertThrows(ProbeSyntaxException.class, () -> k.write("-:gone")).errno());
            k.call("kprobe_target", 1);
            assertTrue(k.bodies().isEmpty());

            // truncate: refused while an event is enabled, then everything goes
            k.write("p:t1 kprobe_target\nr:t2 kprobe_target2");
            k.engine.enable("t2");
            assertEquals(Errno.EBUSY, assertThrows(ProbeSyntaxException.class, k.engine::truncate).errno());
            assertEquals(2, k.engine.events().size());
            k.engine.disable("t2");
            k.engine.truncate();
            assertEquals(List.of(), k.engine.events());
            assertTrue(k.kprobes.probesAt(k.sym("kprobe_target2")).isEmpty());
        }
    }

    private static void assertLogged(ProbeSyntaxException e, KernelError err, Errno errno, String command, int caret) {
        assertEquals(err, e.error(), e.toString());
        assertEquals(errno, e.errno());
        assertEquals("trace_kprobe: error: " + err.message() + "\n  Command: " + command + "\n"
                + " ".repeat(11 + caret) + "^\n", e.errorLog());
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void registrationErrorsAsTheKernelLogsThem(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            // x86: inside "mov %rsp, %rbp" (push %rbp is one byte); arm64: not 4-byte aligned
            ProbeSyntaxException e = assertThrows(ProbeSyntaxException.class, () -> k.write("p:bad   kprobe_target+2 x=R0"));
            String cmd = k.script("p:bad kprobe_target+2 x=R0");
            if (x86(k)) assertLogged(e, KernelError.BAD_INSN_BNDRY, Errno.EILSEQ, cmd, 6);
            else assertLogged(e, KernelError.FAIL_REG_PROBE, Errno.EINVAL, cmd, 6);

            long nk = k.sym("nokprobe_func");
            k.kprobes.blacklist().add(nk, nk + 0x100, "nokprobe_func");
            assertLogged(assertThrows(ProbeSyntaxException.class, () -> k.write("r:bl nokprobe_func")),
                    KernelError.FAIL_REG_PROBE, Errno.EINVAL, "r:bl nokprobe_func", 5);

            // an address in no symbol: kept unregistered for a module to come, as Linux does
            // (recorded: arm64 6.1 accepts "p:t27 0xffff800008000000" with "This probe might be able to register ...")
            List<String> kernelLog = new ArrayList<>();
            k.engine.rules(null, kernelLog::add);
            k.write("p:nowhere 0x1000");
            assertEquals(List.of(KernelProbeSites.DEFERRED_MESSAGE), kernelLog);
            k.write("-:nowhere");
            // an unknown @SYM: resolved at registration
            assertLogged(assertThrows(ProbeSyntaxException.class, () -> k.write("p:nosym kprobe_target v=@no_such_var")),
                    KernelError.BAD_PROBE_ADDR, Errno.ENOENT, "p:nosym kprobe_target v=@no_such_var", 8);
            // a parse error goes to the log as well
            assertThrows(ProbeSyntaxException.class, () -> k.write("p:x kprobe_target %nosuchreg"));

            assertEquals(List.of(), k.engine.events());
            String log = k.engine.errorLog();
            assertEquals(4, log.lines().filter(l -> l.contains("trace_kprobe: error: ")).count(), log);
            assertTrue(log.lines().findFirst().orElseThrow().matches("\\[ *\\d+\\.\\d{6}\\] trace_kprobe: error: .*"), log);
            assertTrue(log.contains("Invalid register name"), log);
            for (int i = 0; i < 10; i++) assertThrows(ProbeSyntaxException.class, () -> k.write("p:x kprobe_target %nosuchreg"));
            assertEquals(EventEngine.ERROR_LOG_MAX, k.engine.errorLog().lines().filter(l -> l.contains("error: ")).count());
            k.engine.clearErrorLog();
            assertEquals("", k.engine.errorLog());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void multiprobeAppendRules(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            k.write("p:multi kprobe_target a=R0");
            k.write("p:multi kprobe_target2 a=R0");
            assertEquals(List.of("kprobes/multi"), k.engine.events());

            assertLogged(assertThrows(ProbeSyntaxException.class, () -> k.write("r:multi kprobe_target")),
                    KernelError.DIFF_PROBE_TYPE, Errno.EEXIST, "r:multi kprobe_target", 0);
            assertLogged(assertThrows(ProbeSyntaxException.class, () -> k.write("p:multi kprobe_target2 b=R0")),
                    KernelError.DIFF_ARG_TYPE, Errno.EEXIST, k.script("p:multi kprobe_target2 b=R0"), 23);
            assertLogged(assertThrows(ProbeSyntaxException.class, () -> k.write("p:multi kprobe_target2 a=R0:u32")),
                    KernelError.DIFF_ARG_TYPE, Errno.EEXIST, k.script("p:multi kprobe_target2 a=R0:u32"), 23);
            // more arguments: the first extra one; fewer: past the end of the command
            String more = k.script("p:multi kprobe_target2 a=R0 b=R1");
            assertLogged(assertThrows(ProbeSyntaxException.class, () -> k.write("p:multi kprobe_target2 a=R0 b=R1")),
                    KernelError.DIFF_ARG_TYPE, Errno.EEXIST, more, more.lastIndexOf(' ') + 1);
            assertLogged(assertThrows(ProbeSyntaxException.class, () -> k.write("p:multi kprobe_target2")),
                    KernelError.DIFF_ARG_TYPE, Errno.EEXIST, "p:multi kprobe_target2", 23);
            assertLogged(assertThrows(ProbeSyntaxException.class, () -> k.write("p:multi kprobe_target a=R0")),
                    KernelError.SAME_PROBE, Errno.EEXIST, k.script("p:multi kprobe_target a=R0"), 0);
            k.engine.foreignEvent("sched", "sched_switch");
            assertLogged(assertThrows(ProbeSyntaxException.class, () -> k.write("p:sched/sched_switch kprobe_target")),
                    KernelError.EVENT_EXIST, Errno.EEXIST, "p:sched/sched_switch kprobe_target", 0);

            k.engine.enable("multi");
            // appended to an enabled event: enabled at once; same place, different expression is allowed
            k.write("p:multi kprobe_target a=R1");
            k.call("kprobe_target", 5, 7);
            k.call("kprobe_target2", 6);
            List<String> got = k.bodies();
            assertEquals(3, got.size(), got.toString());
            assertTrue(got.containsAll(List.of("multi: (kprobe_target+0x0/0x100) a=0x5", "multi: (kprobe_target+0x0/0x100) a=0x7")), got.toString());
            assertEquals("multi: (kprobe_target2+0x0/0x100) a=0x6", got.get(2));
            assertEquals(k.script("p:kprobes/multi kprobe_target a=R0\np:kprobes/multi kprobe_target2 a=R0\np:kprobes/multi kprobe_target a=R1\n"),
                    k.engine.listing());
            assertEquals(TraceFormatter.profileLine("multi", 1, 0) + "\n" + TraceFormatter.profileLine("multi", 1, 0) + "\n"
                    + TraceFormatter.profileLine("multi", 1, 0) + "\n", k.engine.profile());

            // deleting one probe of an enabled event is allowed while it has siblings
            k.write(k.script("-:multi kprobe_target2 a=R0"));
            assertEquals(k.script("p:kprobes/multi kprobe_target a=R0\np:kprobes/multi kprobe_target a=R1\n"), k.engine.listing());
            assertTrue(k.kprobes.probesAt(k.sym("kprobe_target2")).isEmpty());
            k.write("-:multi kprobe_target a=R1");
            assertEquals(Errno.EBUSY, assertThrows(ProbeSyntaxException.class, () -> k.write("-:multi")).errno());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void formatFilesWithStableIds(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            k.engine.firstEventId(1500);
            k.write("p:fmt kprobe_target a=R0:u32 s=+0(R1):string\nr:fr kprobe_target rv=$retval");
            assertEquals(1500, k.engine.id("fmt"));
            assertEquals(1501, k.engine.id("kprobes/fr"));
            assertEquals("""
                    name: fmt
                    ID: 1500
                    format:
                    \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
                    \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
                    \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
                    \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

                    \tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
                    \tfield:u32 a;\toffset:16;\tsize:4;\tsigned:0;
                    \tfield:__data_loc char[] s;\toffset:20;\tsize:4;\tsigned:1;

                    print fmt: "(%lx) a=%u s=\\"%s\\"", REC->__probe_ip, REC->a, __get_str(s)
                    """, k.engine.format("fmt"));
            assertEquals(List.of("kprobes/fmt", "kprobes/fr"), List.copyOf(k.engine.formats().keySet()));
            assertTrue(k.engine.formats().get("kprobes/fr").contains("print fmt: \"(%lx <- %lx) rv=0x%Lx\", REC->__probe_func, REC->__probe_ret_ip, REC->rv"));
            // ids are never reused
            k.write("-:fmt\np:fmt kprobe_target");
            assertEquals(1502, k.engine.id("fmt"));
            assertThrows(IllegalStateException.class, () -> k.engine.firstEventId(10));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void disabledEventsRecordNothingAndAutoNames(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            k.write("# a comment\n\np kprobe_target\nr kprobe_target2 # trailing");
            assertEquals(List.of("kprobes/p_kprobe_target_0", "kprobes/r_kprobe_target2_0"), k.engine.events());
            assertFalse(k.kprobes.isArmed(k.sym("kprobe_target")));
            k.call("kprobe_target", 1);
            assertTrue(k.records.isEmpty());
            k.engine.enableGroup("kprobes", true);
            assertTrue(k.kprobes.isArmed(k.sym("kprobe_target")));
            k.call("kprobe_target", 1);
            k.call("kprobe_target2", 1);
            assertEquals(List.of("p_kprobe_target_0: (kprobe_target+0x0/0x100)", "r_kprobe_target2_0: (halt_stub+0x0/0x100 <- kprobe_target2)"),
                    k.bodies());
            k.engine.disableAll();
            assertFalse(k.kprobes.isArmed(k.sym("kprobe_target")));
            assertEquals(2, k.engine.recorded());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void aDeleteInADefinitionsFileRemovesTheEventBeforeEnabling(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            List<String> on = k.engine.writeAndEnable(List.of("p:gone kprobe_target", "p:kept kprobe_target2", "-:gone"));
            assertEquals(List.of("kprobes/kept"), on);
            assertTrue(k.engine.isEnabled("kept"));
            assertEquals(List.of(), k.engine.events().stream().filter(e -> e.contains("gone")).toList());
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void bootTimeDefinitionsAreEnabled(Arch a) throws Exception {
        try (GuestKernel k = new GuestKernel(a)) {
            k.write("p:other kprobe_target2");
            List<String> on = k.engine.writeAndEnable(List.of(k.script("p:myopen kprobe_target dfd=R0 # the open"),
                    "r:myret kprobe_target ret=$retval\n# comment\n"));
            assertEquals(List.of("kprobes/myopen", "kprobes/myret"), on);
            assertFalse(k.engine.isEnabled("other"));
            k.call("kprobe_target", 9);
            assertEquals(List.of("myopen: (kprobe_target+0x0/0x100) dfd=0x9", "myret: (halt_stub+0x0/0x100 <- kprobe_target) ret=0x3"),
                    k.bodies());
            ProbeSyntaxException e = assertThrows(ProbeSyntaxException.class,
                    () -> k.engine.writeAndEnable(List.of("p:fine kprobe_target2", "p:bad kprobe_target $retval", "p:never kprobe_target2")));
            assertEquals(KernelError.RETVAL_ON_PROBE, e.error());
            assertTrue(k.engine.hasEvent("fine"));
            assertFalse(k.engine.isEnabled("fine"), "nothing is enabled when a definition fails");
            assertFalse(k.engine.hasEvent("never"));
        }
    }
}
