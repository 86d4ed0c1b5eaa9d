package dev.kpemu.kprobes.events;

import dev.kpemu.kprobes.Errno;
import dev.kpemu.machine.Arch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import static org.junit.jupiter.api.Assertions.*;

/** Fetch plans run against a fake guest, and every type printed as the kernel prints it. */
class FetchAndFormatTest {
    static final long KDATA = 0xffff888000100000L;
    static final long USER = 0x00007fffd1ec4440L;

    FakeKernel k = new FakeKernel();
    TraceFormatter fmt = new TraceFormatter(k);

    String args(Arch a, String def) throws Exception {
        TraceProbe t = (TraceProbe) new ProbeParser(a, Dialect.LINUX_6_1, k).parse(def);
        CompiledProbe c = CompiledProbe.compile(t, a, k);
        byte[] data = c.fetch(k);
        return fmt.formatArgs(c, data);
    }

    String args(Arch a, Dialect d, String def) throws Exception {
        TraceProbe t = (TraceProbe) new ProbeParser(a, d, k).parse(def);
        CompiledProbe c = CompiledProbe.compile(t, a, k);
        return fmt.formatArgs(c, c.fetch(k));
    }

    static int slot(Arch a, String reg) { return RegisterSet.of(a).lookup(reg).slot(); }

    @Test
    void everyNumericTypeOnX86() throws Exception {
        Arch a = Arch.X86_64;
        k.regs[slot(a, "ax")] = 0xfffffffffffffffeL;
        assertEquals(" a=254 b=65534 c=4294967294 d=18446744073709551614 e=-2 f=-2 g=-2 h=-2 i=0xfe j=0xfffe k=0xfffffffe l=0xfffffffffffffffe",
                args(a, "p vfs_read a=%ax:u8 b=%ax:u16 c=%ax:u32 d=%ax:u64 e=%ax:s8 f=%ax:s16 g=%ax:s32 h=%ax:s64 "
                        + "i=%ax:x8 j=%ax:x16 k=%ax:x32 l=%ax:x64"));
        k.regs[slot(a, "ax")] = 0x41;
        assertEquals(" c='A' d=0x41 z=0", args(a, Dialect.MAINLINE, "p vfs_read c=%ax:char d=%ax z=\\0:u8"));
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void argumentsRetvalStackAndComm(Arch a) throws Exception {
        RegisterSet rs = RegisterSet.of(a);
        for (int i = 0; i < rs.registerArguments(); i++) k.regs[rs.argumentSlot(i)] = 100 + i;
        k.sp = 0xffffc90000013f00L;
        for (int i = 0; i < 16; i++) k.putLong(k.sp + 8L * i, 1000 + i);
        k.comm = "myapp".getBytes();
        String out = args(a, "p vfs_read a1=$arg1:u64 a6=$arg6:u64 a7=$arg7:u64 a9=$arg9:u64 s=$stack s0=$stack0:u64 s3=$stack3:u64 c=$comm C=$COMM");
        String a7 = a == Arch.X86_64 ? "1001" : "106";
        String a9 = a == Arch.X86_64 ? "1003" : "0";
        assertEquals(" a1=100 a6=105 a7=" + a7 + " a9=" + a9 + " s=0xffffc90000013f00 s0=1000 s3=1003 c=\"myapp\" C=\"myapp\"", out);
        k.regs[rs.returnValueSlot()] = -2;
        assertEquals(" arg1=0xfffffffffffffffe arg2=-2", args(a, "r vfs_read $retval $retval:s32"));
        // $stackN outside the thread stack (THREAD_SIZE-aligned region of sp) reads 0
        assertEquals(" arg1=0", args(a, "p vfs_read $stack100:u64"));
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void stringsUserStringsAndFaults(Arch a) throws Exception {
        String r0 = a == Arch.X86_64 ? "%di" : "%x0";
        String r1 = a == Arch.X86_64 ? "%si" : "%x1";
        k.regs[slot(a, r0.substring(1))] = KDATA;
        k.regs[slot(a, r1.substring(1))] = USER;
        k.putString(KDATA, "/etc/passwd");
        k.putString(USER, "/tmp/x");
        k.putLong(KDATA + 0x40, KDATA);         // pointer to the kernel string
        k.putLong(KDATA + 0x48, KDATA + 5);
        assertEquals(" k=\"/etc/passwd\" u=\"/tmp/x\" uu=\"/tmp/x\" badk=(fault) imm=\"hi\" arr={\"/etc/passwd\",\"passwd\"}",
                args(a, "p vfs_read k=+0(" + r0 + "):string u=+0(" + r1 + "):ustring uu=+u0(" + r1 + "):string "
                        + "badk=+0(" + r1 + "):string imm=\\\"hi\" arr=+64(" + r0 + "):string[2]"));
        // a kernel address through ustring faults; a dereference that faults before the string is
        // read leaves b's __data_loc pointing where the next string goes (6.1's store_trace_args,
        // recorded: CorpusDefectsTest), so b prints c's text
        assertEquals(" a=(fault) b=\"\" c=\"\"", args(a, "p vfs_read a=+0(" + r0 + "):ustring b=+0(+0(" + r1 + ")):string c=\\\""));
        assertEquals(" b=\"kp\" c=\"kp\" d=(fault)", args(a, "p vfs_read b=+0(+0(" + r1 + ")):string c=\\\"kp\" d=+0(+0(" + r1 + ")):string"));
        // @ADDR:string is the string at ADDR; numeric reads that fault store 0
        assertEquals(" s=\"/etc/passwd\" n=0 m=0x2f", args(a, "p vfs_read s=@0x" + Long.toHexString(KDATA) + ":string n=+0(" + r1 + "):u32 m=@0x" + Long.toHexString(KDATA) + ":x8"));
    }

    @Test
    void arraysBitfieldsAndSymbols() throws Exception {
        Arch a = Arch.X86_64;
        k.regs[slot(a, "di")] = KDATA;
        k.put(KDATA, new byte[] {1, 2, 3, 4, (byte) 0xAB, 0, 0, 0});
        k.putLong(KDATA + 8, FakeKernel.KBASE + 0x2000 + 0x10);   // do_sys_openat2+0x10
        assertEquals(" a={1,2,3,4} b={0x201,0x403} c=10 d=11 e=1 f={0,0}",
                args(a, "p vfs_read a=+0(%di):u8[4] b=+0(%di):x16[2] c=+4(%di):b4@4/8 d=+4(%di):b4@0/8 e=+0(%di):b2@0/8 f=+0(%di):b1@7/8[2]"));
        assertEquals(" s=do_sys_openat2+0x10/0x1a0 t=0x1234 z=0x0",
                args(a, "p vfs_read s=+8(%di):symbol t=\\0x1234:symbol z=\\0:symbol"));
        k.regs[slot(a, "cx")] = FakeKernel.KBASE + 0x3004;
        // symstr leaves its NUL uncounted: the next dynamic argument runs on from it (Debian's 6.1,
        // recorded: CorpusDefectsTest)
        assertEquals(" s=\"do_sys_openat2+0x10/0x1a0trace_printk_irq_work+0x4/0x40 [trace_printk]\" m=\"trace_printk_irq_work+0x4/0x40 [trace_printk]\" n=1",
                args(a, "p vfs_read s=+8(%di):symstr m=%cx:symstr n=\\1:u8"));
        k.putLong(FakeKernel.KBASE + 0x200000, 4294967296L + 250);
        assertEquals(" j=4294967546 lo=250", args(a, "p vfs_read j=@jiffies:u64 lo=@jiffies:u32"));
    }

    /**
     * Whether a probe's arguments read guest memory (the kprobes engine then writes an ftrace
     * site's call frame for them): registers, $retval, $stack and immediates do not; dereferences,
     * strings ($comm's too), $stackN and @symbols do.
     */
    @Test
    void readsMemoryTellsRegistersFromMemory() throws Exception {
        java.util.function.Function<String, Boolean> reads = def -> {
            try {
                return CompiledProbe.compile((TraceProbe) new ProbeParser(Arch.X86_64, Dialect.LINUX_6_1, k).parse(def), Arch.X86_64, k).readsMemory();
            } catch (ProbeSyntaxException e) {
                throw new AssertionError(def, e);
            }
        };
        for (String def : new String[] {"p vfs_read", "p vfs_read a=%di b=%si:x32", "p vfs_read n=\\12",
                "r vfs_read ret=$retval", "p vfs_read sp=$stack"})
            assertFalse(reads.apply(def), def);
        for (String def : new String[] {"p vfs_read m=+0(%di)", "p vfs_read f=+0(%si):string", "p vfs_read u=+u0(%si):u8",
                "p vfs_read s1=$stack1", "p vfs_read v=@jiffies", "p vfs_read a=%di m=+8(%sp)", "p vfs_read c=$comm"})
            assertTrue(reads.apply(def), def);
    }

    @Test
    void unknownDataSymbolFailsRegistration() throws Exception {
        TraceProbe t = (TraceProbe) new ProbeParser(Arch.X86_64, Dialect.LINUX_6_1, k).parse("p vfs_read @nosuch");
        ProbeSyntaxException e = assertThrows(ProbeSyntaxException.class, () -> CompiledProbe.compile(t, Arch.X86_64, k));
        assertEquals(KernelError.BAD_PROBE_ADDR, e.error());
        assertEquals(Errno.ENOENT, e.errno());
        assertEquals(2, e.position());
    }

    @Test
    void traceLinesForKprobeAndKretprobe() throws Exception {
        Arch a = Arch.ARM64;
        KprobeDef p = (KprobeDef) new ProbeParser(a, Dialect.LINUX_6_1, k).parse("p:myopen do_sys_openat2 dfd=%x0:s32 fn=+0(%x1):ustring");
        KretprobeDef r = (KretprobeDef) new ProbeParser(a, Dialect.LINUX_6_1, k).parse("r:myret do_sys_openat2 ret=$retval:s32");
        k.regs[0] = -100;
        k.regs[1] = USER;
        k.putString(USER, "/etc/ld.so.cache");
        CompiledProbe cp = CompiledProbe.compile(p, a, k);
        TraceContext ctx = new TraceContext("cat", 87, 1, TraceContext.latency(true, false, false, false, false, false, false, 1, 0), 1_038_282_286_875_000L);
        assertEquals("             cat-87      [001] d..1. 1038282.286875: myopen: (do_sys_openat2+0x0/0x1a0) dfd=-100 fn=\"/etc/ld.so.cache\"",
                fmt.kprobeLine(ctx, cp, FakeKernel.KBASE + 0x2000, cp.fetch(k)));
        k.regs[0] = 3;
        CompiledProbe cr = CompiledProbe.compile(r, a, k);
        assertEquals("myret: (do_sys_open+0x1b/0xd6 <- do_sys_openat2) ret=3",
                fmt.kretprobeEvent(cr, FakeKernel.KBASE + 0x2000, FakeKernel.KBASE + 0x2200 + 0x1b, cr.fetch(k)));
        assertEquals("myret: (0xffff000012345678 <- 0x00001000) ret=3", fmt.kretprobeEvent(cr, 0x1000, 0xffff000012345678L, cr.fetch(k)));
        assertEquals("x: (0)", fmt.kprobeEvent(CompiledProbe.compile((TraceProbe) new ProbeParser(a).parse("p:x 0x10"), a, k), 0, new byte[0]));
    }

    @Test
    void contextPrefixColumns() {
        assertEquals("           <...>-1447    [001] .....    12.000001: ",
                TraceFormatter.contextPrefix(new TraceContext("<...>", 1447, 1, ".....", 12_000_001_999L)));
        assertEquals("          <idle>-0       (-------) [012] dNh2. 123456.654321: ",
                TraceFormatter.contextPrefix(new TraceContext("<idle>", 0, 0, 12,
                        TraceContext.latency(true, false, true, true, false, true, false, 2, 0), 123_456_654_321_000L)));
        // wider than the columns: nothing cut, nothing padded (%16s, %-7d, %7d, %03d, %5d as the kernel's seq_printf)
        assertEquals("kworker/u2:1-events_unbound-12345678 (1234567) [1000] .....     0.000000: ",
                TraceFormatter.contextPrefix(new TraceContext("kworker/u2:1-events_unbound", 12345678, 1234567, 1000, ".....", 999L)));
        assertEquals("               a-7       (     42) [007] d.... 123456789.000042: ",
                TraceFormatter.contextPrefix(new TraceContext("a", 7, 42, 7, "d....", 123_456_789_000_042_000L)));
        assertEquals("DNH1f", TraceContext.latency(true, true, true, true, false, true, true, 1, 15));
        assertEquals("bpz..", TraceContext.latency(false, true, false, true, true, false, false, 0, 0));
        assertEquals(".nZ..", TraceContext.latency(false, false, true, false, true, true, false, 0, 0));
        assertEquals("..s..", TraceContext.latency(false, false, false, false, false, false, true, 0, 0));
    }

    @Test
    void numbersAreWrittenAsLongsOwnStrings() {
        java.util.SplittableRandom r = new java.util.SplittableRandom(30);
        long[] edges = {0, 1, 9, 10, 0xf, 0x10, 0xff, 0x100, 99_999, 100_000, 0xffff_ffffL, 0x1_0000_0000L, Long.MAX_VALUE,
                Long.MIN_VALUE, Long.MIN_VALUE + 1, -1, -10, 0xffff_8880_0123_4567L};
        for (long v : edges) assertNumbers(v);
        for (int i = 0; i < 2000; i++) assertNumbers(r.nextLong() >> r.nextInt(64));
    }

    private static void assertNumbers(long v) {
        assertEquals("x" + Long.toHexString(v), new LineBytes(4).ascii('x').hex(v).toText());
        assertEquals("x" + v, new LineBytes(4).ascii('x').decimal(v).toText());
        assertEquals("x" + Long.toUnsignedString(v), new LineBytes(4).ascii('x').unsigned(v).toText());
    }

    /** A line's bytes: ASCII a byte each, text from the guest back to the guest's bytes. */
    @Test
    void lineBytesAreTheGuestsBytes() {
        byte[] raw = {'a', (byte) 0xff, 'b', (byte) 0xc3, (byte) 0xa9, '-', (byte) 0xe6, (byte) 0x96};
        String text = GuestText.decode(raw);
        LineBytes b = new LineBytes(2).text("ab").text(text).fill(' ', 3).fill('0', -1).bytes(raw, 1, 2);
        java.io.ByteArrayOutputStream want = new java.io.ByteArrayOutputStream();
        want.writeBytes("ab".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        want.writeBytes(raw);
        want.writeBytes("   ".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        want.write(0xff);
        want.write('b');
        assertArrayEquals(want.toByteArray(), b.toByteArray());
        assertEquals("ab" + text + "   " + GuestText.decode(new byte[] {(byte) 0xff, 'b'}), b.toText());
    }

    @Test
    void profileLines() {
        assertEquals("  myprobe                                                    3               0",
                TraceFormatter.profileLine("myprobe", 3, 0));
        assertEquals(2 + 44 + 1 + 15 + 1 + 15, TraceFormatter.profileLine("x", 1, 2).length());
    }

    @Test
    void formatFiles() throws Exception {
        ProbeParser p = new ProbeParser(Arch.X86_64, Dialect.LINUX_6_1, k);
        CompiledProbe c = CompiledProbe.compile((TraceProbe) p.parse(
                "p:myprobe do_sys_open dfd=%di:s32 filename=+0(%si):ustring flags=%dx:x32 a=+0(%di):u8[3] b=%cx:b4@4/32 $stack"), Arch.X86_64, k);
        assertEquals("""
                name: myprobe
                ID: 1234
                format:
                \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
                \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
                \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
                \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

                \tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
                \tfield:s32 dfd;\toffset:16;\tsize:4;\tsigned:1;
                \tfield:__data_loc char[] filename;\toffset:20;\tsize:4;\tsigned:1;
                \tfield:u32 flags;\toffset:24;\tsize:4;\tsigned:0;
                \tfield:u8 a[3];\toffset:28;\tsize:3;\tsigned:0;
                \tfield:u32 b;\toffset:31;\tsize:4;\tsigned:0;
                \tfield:u64 arg6;\toffset:35;\tsize:8;\tsigned:0;

                print fmt: "(%lx) dfd=%d filename=\\"%s\\" flags=0x%x a={%u,%u,%u} b=%u arg6=0x%Lx", REC->__probe_ip, REC->dfd, __get_str(filename), REC->flags, REC->a[0], REC->a[1], REC->a[2], REC->b, REC->arg6
                """, TraceFormatter.formatFile(c, 1234));
        CompiledProbe r = CompiledProbe.compile((TraceProbe) new ProbeParser(Arch.X86_64, Dialect.MAINLINE, k)   // char: 6.5+
                .parse("r:myret do_sys_open $retval s=+0(%ax):string[2] c=%ax:char y=%ax:symbol"), Arch.X86_64, k);
        assertEquals("""
                name: myret
                ID: 7
                format:
                \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
                \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
                \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
                \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

                \tfield:unsigned long __probe_func;\toffset:8;\tsize:8;\tsigned:0;
                \tfield:unsigned long __probe_ret_ip;\toffset:16;\tsize:8;\tsigned:0;
                \tfield:u64 arg1;\toffset:24;\tsize:8;\tsigned:0;
                \tfield:__data_loc char[][2] s;\toffset:32;\tsize:8;\tsigned:1;
                \tfield:u8 c;\toffset:40;\tsize:1;\tsigned:0;
                \tfield:u64 y;\toffset:41;\tsize:8;\tsigned:0;

                print fmt: "(%lx <- %lx) arg1=0x%Lx s={\\"%s\\",\\"%s\\"} c='%c' y=%pS", REC->__probe_func, REC->__probe_ret_ip, REC->arg1, __get_str(s[0]), __get_str(s[1]), REC->c, REC->y
                """, TraceFormatter.formatFile(r, 7));
    }

    @Test
    void oversizedEntriesAreDropped() throws Exception {
        k.regs[slot(Arch.X86_64, "di")] = KDATA;
        k.putString(KDATA, "x".repeat(5000));
        CompiledProbe c = CompiledProbe.compile((TraceProbe) new ProbeParser(Arch.X86_64, Dialect.LINUX_6_1, k)
                .parse("p vfs_read +0(%di):string"), Arch.X86_64, k);
        assertNull(c.fetch(k));
        k.putString(KDATA, "x".repeat(100));
        assertEquals(" arg1=\"" + "x".repeat(100) + "\"", fmt.formatArgs(c, c.fetch(k)));
    }
}
