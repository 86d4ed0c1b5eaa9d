package dev.kpemu.kprobes.events;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.RecordedProbeHits.Read;

/**
 * The reads of kernel memory a probe's fetches make, planned for the machine's native code to make
 * at a recorded hit ({@link CompiledProbe#recordedReads}), and the line arguments it may then print
 * ({@link CompiledProbe#lineArgs}): the plan, run over a fake guest as the native code runs it,
 * reads exactly what the fetch reads (address and size, in order), so a replay finds each read.
 */
class NativeFetchPlanTest {
    static final long KDATA = 0xffff888000100000L;

    private final FakeKernel k = new FakeKernel();

    private CompiledProbe compile(Arch a, String def) throws Exception {
        return CompiledProbe.compile((TraceProbe) new ProbeParser(a, Dialect.LINUX_6_1, k).parse(def), a, k);
    }

    /** A record's register index of a pt_regs slot: here the slot itself. */
    private static int index(int slot) { return slot; }

    private static int slot(Arch a, String reg) { return RegisterSet.of(a).lookup(reg).slot(); }

    private static String r(Arch a, int n) { return a == Arch.X86_64 ? new String[] {"di", "si", "dx"}[n] : "x" + n; }

    /** The reads the plan makes over the fake guest, as kpemu_hits_site_reads makes them: address and size each. */
    private List<long[]> runPlan(Read[] plan) {
        List<long[]> out = new ArrayList<>();
        long[] values = new long[plan.length];
        byte[] b = new byte[8];
        for (int j = 0; j < plan.length; j++) {
            long base = plan[j].fromRead() ? values[plan[j].base()] : k.regs[plan[j].base()];
            long address = base + plan[j].offset();
            if (plan[j].string()) {
                out.add(new long[] {address, -1});
                continue;
            }
            java.util.Arrays.fill(b, (byte) 0);
            if (!k.readKernel(address, b, 0, plan[j].size())) throw new AssertionError("the plan's read at 0x" + Long.toHexString(address) + " fails");
            values[j] = java.nio.ByteBuffer.wrap(b).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong();
            out.add(new long[] {address, plan[j].size()});
        }
        return out;
    }

    /** The reads a fetch makes: its reads of kernel memory, in order. */
    private List<long[]> fetchReads(CompiledProbe c) {
        List<long[]> out = new ArrayList<>();
        FetchContext logging = new FetchContext() {
            @Override public long register(int slot) { return k.register(slot); }
            @Override public long stackPointer() { return k.stackPointer(); }
            @Override public boolean readKernel(long address, byte[] dst, int offset, int len) {
                out.add(new long[] {address, len});
                return k.readKernel(address, dst, offset, len);
            }
            @Override public int readKernelString(long address, byte[] dst, int offset, int max) {
                out.add(new long[] {address, -1});      // a string read: each of the fetch's two passes reads it
                return k.readKernelString(address, dst, offset, max);
            }
            @Override public boolean readUser(long address, byte[] dst, int offset, int len) { throw new AssertionError("a user read"); }
            @Override public byte[] comm() { return k.comm(); }
            @Override public KernelSymbols symbols() { return k; }
        };
        c.fetch(logging);
        return out;
    }

    /** The same reads, each address with its size (-1: a string): the fetch reads a string twice (its length first), a plan reads what two arguments read twice. */
    private void assertSameReads(List<long[]> expected, List<long[]> actual) {
        java.util.function.Function<List<long[]>, java.util.Set<String>> set = l -> new java.util.TreeSet<>(
                l.stream().map(x -> Long.toHexString(x[0]) + "/" + x[1]).toList());
        assertEquals(set.apply(expected), set.apply(actual), "reads");
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void registerOnlyArgumentsReadNothingAndPrintFromTheirRegisters(Arch a) throws Exception {
        CompiledProbe c = compile(a, "p vfs_read a=%" + r(a, 0) + ":x64 b=%" + r(a, 2) + ":s32 c=$comm");
        assertEquals(0, c.recordedReads(NativeFetchPlanTest::index).length);
        assertNull(c.lineArgs(NativeFetchPlanTest::index), "$comm prints as a string: the Java side formats the line");
        CompiledProbe d = compile(a, "p vfs_read a=%" + r(a, 0) + ":x64 b=%" + r(a, 2) + ":s32");
        assertArrayEquals(new int[] {slot(a, r(a, 0)), 0, 8, slot(a, r(a, 2)), 2, 4}, d.lineArgs(NativeFetchPlanTest::index));
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void dereferencesAndFieldsArePlannedAsTheFetchReadsThem(Arch a) throws Exception {
        long object = KDATA, inner = KDATA + 0x800;
        k.regs[slot(a, r(a, 0))] = object;
        k.regs[slot(a, r(a, 1))] = object + 0x40;
        k.putLong(object + 8, 0x1122334455667788L);
        k.putLong(object + 0x40 + 16, inner);
        k.putLong(inner + 4, 0xfffffffffffffff0L);
        CompiledProbe c = compile(a, "p vfs_read m=+8(%" + r(a, 0) + "):u32 n=+4(+16(%" + r(a, 1) + ")):s16 x=%" + r(a, 0) + ":x64 w=+8(%"
                + r(a, 0) + "):x64");
        Read[] plan = c.recordedReads(NativeFetchPlanTest::index);
        assertNotNull(plan);
        assertEquals(List.of(new Read(false, slot(a, r(a, 0)), 8, 4), new Read(false, slot(a, r(a, 1)), 16, 8), new Read(true, 1, 4, 2),
                new Read(false, slot(a, r(a, 0)), 8, 8)), List.of(plan));
        assertSameReads(fetchReads(c), runPlan(plan));
        assertArrayEquals(new int[] {CompiledProbe.LINE_READ, 1, 4, CompiledProbe.LINE_READ + 2, 2, 2, slot(a, r(a, 0)), 0, 8,
                CompiledProbe.LINE_READ + 3, 0, 8}, c.lineArgs(NativeFetchPlanTest::index));
        assertEquals(" m=1432778632 n=-16 x=0xffff888000100000 w=0x1122334455667788", new TraceFormatter(k).formatArgs(c, c.fetch(k)));
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void argumentsInRegistersPrintFromTheirRegistersBesideReads(Arch a) throws Exception {
        RegisterSet rs = RegisterSet.of(a);
        k.regs[rs.argumentSlot(0)] = KDATA;
        k.putLong(KDATA + 8, 0x1234);
        CompiledProbe c = compile(a, "p vfs_read m=+8(%" + r(a, 0) + "):u32 a2=$arg2:x64 a1=$arg1:u64");
        assertEquals(List.of(new Read(false, rs.argumentSlot(0), 8, 4)), List.of(c.recordedReads(NativeFetchPlanTest::index)));
        assertArrayEquals(new int[] {CompiledProbe.LINE_READ, 1, 4, rs.argumentSlot(1), 0, 8, rs.argumentSlot(0), 1, 8},
                c.lineArgs(NativeFetchPlanTest::index));
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void aKernelStringIsReadAndPrintedNatively(Arch a) throws Exception {
        long name = KDATA + 0x200;
        k.regs[slot(a, r(a, 2))] = KDATA;
        k.putLong(KDATA, name);
        k.putString(name, "/bin/cat");
        CompiledProbe c = compile(a, "p vfs_read fn=+0(+0(%" + r(a, 2) + ")):string n=+0(%" + r(a, 2) + "):x64");
        Read[] plan = c.recordedReads(NativeFetchPlanTest::index);
        assertEquals(List.of(new Read(false, slot(a, r(a, 2)), 0, 8), Read.string(true, 0, 0), new Read(false, slot(a, r(a, 2)), 0, 8)),
                List.of(plan));
        assertSameReads(fetchReads(c), runPlan(plan));
        assertArrayEquals(new int[] {CompiledProbe.LINE_READ + 1, CompiledProbe.LINE_STRING, 0, CompiledProbe.LINE_READ + 2, 0, 8},
                c.lineArgs(NativeFetchPlanTest::index), "the string printed from its read");
        assertNull(compile(a, "p vfs_read s=+0(%" + r(a, 2) + "):symstr").lineArgs(NativeFetchPlanTest::index), "a symbol's name prints on the Java side");
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void aBitfieldIsReadNativelyButPrintedByTheJavaSide(Arch a) throws Exception {
        k.regs[slot(a, r(a, 0))] = KDATA;
        CompiledProbe c = compile(a, "p vfs_read b=+8(%" + r(a, 0) + "):b4@2/32");
        assertEquals(List.of(new Read(false, slot(a, r(a, 0)), 8, 4)), List.of(c.recordedReads(NativeFetchPlanTest::index)));
        assertNull(c.lineArgs(NativeFetchPlanTest::index));
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void whatTheNativeCodeCannotReadIsNotPlanned(Arch a) throws Exception {
        for (String arg : List.of("+0(%" + r(a, 0) + "):u8[4]", "$stack0", "+0(%" + r(a, 0) + "):string[2]", "+0(@jiffies):u64")) {
            CompiledProbe c = compile(a, "p vfs_read v=" + arg);
            assertNull(c.recordedReads(NativeFetchPlanTest::index), arg);
            assertEquals(false, c.plansReads(), arg);
        }
        CompiledProbe c = compile(a, "p vfs_read v=+8(%" + r(a, 0) + "):u32");
        assertNull(c.recordedReads(slot -> -1), "a register the records do not hold");
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void userMemoryIsPlanned(Arch a) throws Exception {
        long user = 0x00007fffd1ec4440L;
        k.regs[slot(a, r(a, 1))] = user;
        k.putLong(user, 0x00007fffd1ec5000L);
        k.putString(0x00007fffd1ec5000L, "/etc/passwd");
        CompiledProbe c = compile(a, "p vfs_read b=+u0(%" + r(a, 1) + "):u8 s=+0(%" + r(a, 1) + "):ustring d=+u8(+u0(%" + r(a, 1) + ")):x32");
        Read[] plan = c.recordedReads(NativeFetchPlanTest::index);
        int si = slot(a, r(a, 1));
        assertEquals(List.of(new Read(false, si, 0, 1, false, true), new Read(false, si, 0, 0, true, true), new Read(false, si, 0, 8, false, true),
                new Read(true, 2, 8, 4, false, true)), List.of(plan));
        assertArrayEquals(new int[] {CompiledProbe.LINE_READ, 1, 1, CompiledProbe.LINE_READ + 1, CompiledProbe.LINE_STRING, 0,
                CompiledProbe.LINE_READ + 3, 0, 4}, c.lineArgs(NativeFetchPlanTest::index), "a user string prints from its read");
        CompiledProbe n = compile(a, "p vfs_read n=%" + r(a, 2) + ":u64 b=+u0(%" + r(a, 1) + "):u8 w=+u2(%" + r(a, 1) + "):x16");
        assertArrayEquals(new int[] {slot(a, r(a, 2)), 1, 8, CompiledProbe.LINE_READ, 1, 1, CompiledProbe.LINE_READ + 1, 0, 2},
                n.lineArgs(NativeFetchPlanTest::index), "user values print from their reads");
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void moreReadsThanARecordHoldsAreNotPlanned(Arch a) throws Exception {
        StringBuilder def = new StringBuilder("p vfs_read");
        for (int i = 0; i < 9; i++) def.append(" a").append(i).append("=+").append(8 * i).append("(%").append(r(a, 0)).append("):u64");
        assertNull(compile(a, def.toString()).recordedReads(NativeFetchPlanTest::index));
    }
}
