package dev.kpemu.image.btf;

import static dev.kpemu.image.btf.BtfSyntheticTest.info;
import static org.junit.jupiter.api.Assertions.*;

import dev.kpemu.image.Symbol;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;

/**
 * Where x86-64's {@code current} is, from a small BTF (task_struct, struct pcpu_hot) and the
 * kernel's symbols: GS-relative per-CPU data on SMP kernels; a plain global on a uniprocessor
 * kernel (CONFIG_SMP off, as tinyconfig builds), whose per-CPU variables are ordinary
 * {@code .data} read without a segment prefix.
 */
class KernelStructsCurrentTest {
    static final int INT = 1, PTR = 2, ARRAY = 3, STRUCT = 4;

    static Btf btf() throws Exception {
        BtfSyntheticTest.Strings st = new BtfSyntheticTest.Strings();
        List<int[]> r = new ArrayList<>();
        r.add(new int[]{st.s("int"), info(INT, false, 0), 4, 0x01000020});                     // [1]
        r.add(new int[]{st.s("char"), info(INT, false, 0), 1, 0x03000008});                    // [2]
        r.add(new int[]{0, info(ARRAY, false, 0), 0, 2, 1, 16});                               // [3] char[16]
        r.add(new int[]{st.s("task_struct"), info(STRUCT, false, 3), 64,                       // [4]
                st.s("pid"), 1, 0, st.s("tgid"), 1, 32, st.s("comm"), 3, 256});
        r.add(new int[]{0, info(PTR, false, 0), 4});                                           // [5]
        r.add(new int[]{st.s("pcpu_hot"), info(STRUCT, false, 2), 16,                          // [6]
                st.s("preempt_count"), 1, 0, st.s("current_task"), 5, 64});
        int typeLen = r.stream().mapToInt(a -> a.length * 4).sum();
        byte[] strs = st.out.toByteArray();
        ByteBuffer b = ByteBuffer.allocate(24 + typeLen + strs.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putShort((short) 0xeB9F).put((byte) 1).put((byte) 0).putInt(24).putInt(0).putInt(typeLen).putInt(typeLen).putInt(strs.length);
        for (int[] rec : r) for (int w : rec) b.putInt(w);
        b.put(strs);
        return Btf.parse(b.array(), "test");
    }

    static SymbolTable symbols(long pcpuHot, long perCpuStart, long perCpuEnd) {
        List<Symbol> s = new ArrayList<>(List.of(
                new Symbol("__per_cpu_start", perCpuStart, 'D', 0),
                new Symbol("__per_cpu_end", perCpuEnd, 'D', 0),
                new Symbol("pcpu_hot", pcpuHot, 'D', 0),
                new Symbol("_text", 0xffffffff81000000L, 'T', 0)));
        s.sort((a, b) -> Long.compareUnsigned(a.address(), b.address()));
        return SymbolTable.of(s, 0xffffffff81000000L, a -> OptionalLong.empty(), "test");
    }

    @Test
    void smpKernelReadsCurrentThroughGs() throws Exception {
        // 6.1-6.14: per-CPU symbols are absolute offsets from GS_BASE
        KernelStructs.CurrentTask c = KernelStructs.of(btf(), symbols(0x1f000, 0, 0x30000), Arch.X86_64).currentTask();
        assertEquals(KernelStructs.CurrentTaskSource.X86_PERCPU, c.source());
        assertTrue(c.gsRelative());
        assertEquals(0x1f008, c.gsOffset());
        // 6.15+: the section is linked in place; GS_BASE is added to the link address
        c = KernelStructs.of(btf(), symbols(0xffffffff82c1f000L, 0xffffffff82c00000L, 0xffffffff82c40000L), Arch.X86_64).currentTask();
        assertTrue(c.gsRelative());
        assertEquals(0xffffffff82c1f008L, c.gsOffset());
    }

    @Test
    void uniprocessorKernelKeepsCurrentInAGlobal() throws Exception {
        // a tinyconfig 6.12 kernel: pcpu_hot in .data, the per-CPU section empty elsewhere
        KernelStructs.CurrentTask c = KernelStructs.of(btf(), symbols(0xffffffff81b21bc0L, 0xffffffff81bf7000L, 0xffffffff81bf7000L),
                Arch.X86_64).currentTask();
        assertEquals(KernelStructs.CurrentTaskSource.X86_GLOBAL, c.source());
        assertFalse(c.gsRelative());
        assertEquals(0xffffffff81b21bc8L, c.gsOffset(), "the absolute address of pcpu_hot.current_task");
        assertTrue(c.toString().startsWith("current = *(u64 *)0xffffffff81b21bc8 [pcpu_hot + 0x8]"), c.toString());
    }
}
