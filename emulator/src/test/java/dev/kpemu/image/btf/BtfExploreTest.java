package dev.kpemu.image.btf;

import dev.kpemu.image.GuestImages;
import dev.kpemu.machine.Arch;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("kernel")
class BtfExploreTest {
    @Test
    void explore() throws Exception {
        GuestImages g = GuestImages.forRepository();
        for (Arch a : Arch.values()) {
            long t0 = System.nanoTime();
            var syms = g.symbols(a);
            BtfLocator.Found f = BtfLocator.forGuest(g, a);
            System.out.println(a + " " + f + " in " + (System.nanoTime() - t0) / 1000000 + " ms");
            Btf b = f.btf();
            for (String p : new String[]{"comm", "pid", "tgid", "thread_info", "thread_info.flags", "stack", "thread"})
                try { System.out.println("  task_struct." + p + " " + b.offsetOf("task_struct", p) + " " + b.typeName(b.offsetOf("task_struct", p).typeId())); } catch (Exception e) { System.out.println("  " + e); }
            System.out.println("  " + b.funcProto("do_sys_openat2"));
            var fp = b.funcProto("do_sys_openat2").get();
            for (var p : fp.params()) System.out.println("    " + p.name() + " : " + b.typeName(p.typeId()));
            for (String s : new String[]{"pcpu_hot", "current_task", "__start_BTF", "__stop_BTF", "__per_cpu_offset", "cpu_number"}) {
                System.out.println("  sym " + s + " " + syms.byName(s) + " var " + b.variable(s));
            }
            System.out.println("  struct pcpu_hot " + b.structByName("pcpu_hot"));
            b.structByName("pcpu_hot").ifPresent(t -> t.members().forEach(m -> System.out.println("    " + m)));
            var pr = b.structByName("pt_regs").get();
            for (var m : pr.members()) System.out.println("    pt_regs " + m + " " + b.typeName(m.typeId()));
            for (String s : new String[]{"__get_task_comm", "__x64_sys_getpid", "__arm64_sys_getpid", "set_task_comm", "__set_task_comm"}) syms.byName(s).ifPresent(y -> System.out.println("  " + y + " size " + y.size() + " fileoff 0x" + Long.toHexString(syms.fileOffset(y.address()).orElse(-1))));
            int[] kinds = new int[20];
            for (var t : b.types()) if (t != null) kinds[t.kind().code()]++;
            for (int i = 1; i < 20; i++) System.out.print(BtfKind.ofCode(i) + "=" + kinds[i] + " ");
            System.out.println();
        }
    }
}
