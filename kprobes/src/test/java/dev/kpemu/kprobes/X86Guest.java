package dev.kpemu.kprobes;

import java.util.LinkedHashMap;
import java.util.Map;

import dev.kpemu.machine.x86.X86LongMode;
import dev.kpemu.machine.x86.X86Machine;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * x86-64 guest: low 16 MiB identity-mapped and mapped again at the kernel text base
 * {@code 0xffffffff80000000} (2 MiB pages); text at {@code +0x100000}; the slot area at Linux's
 * unused hole {@link SlotArea#X86_KERNEL_DEFAULT_VA} backed by the top 2 MiB of RAM.
 */
final class X86Guest extends Guest {
    static final long KBASE = 0xffff_ffff_8000_0000L;
    static final long TEXT = KBASE + 0x10_0000, DATA = KBASE + 0x20_0000, STACK_TOP = KBASE + 0x8_0000, IDT = KBASE + 0x6000;
    static final long SLOT_PA = 0xe0_0000;

    /** Function names in order; each starts at TEXT + 0x100 * index. */
    static final String[] NAMES = {
        "kprobe_target", "kprobe_target2", "kprobe_recursed_target", "kprobe_stacktrace_internal_target",
        "kprobe_stacktrace_target", "kprobe_stacktrace_driver", "halt_stub", "rip_load", "rel32_call", "jcc_func",
        "ret_func", "pushf_func", "fault_func", "pf_handler", "bp_handler", "int3_func", "read_text", "patch_text",
        "patchme", "loop_func", "nokprobe_func", "mul_loop", "recurse", "ibt_func",
    };

    private static byte[] code;

    private X86Guest(X86Machine m, Map<String, Long> f) {
        super(m, f, DATA, new SlotArea(SlotArea.X86_KERNEL_DEFAULT_VA, SLOT_PA, 0x20_0000), f.get("halt_stub"));
    }

    static String source() {
        String fn = """
                push %rbp
                mov %rsp, %rbp
                mov %rdi, %rax
                xor %edx, %edx
                mov $3, %ecx
                div %rcx
                """;
        StringBuilder s = new StringBuilder();
        s.append(".set DATA, ").append(DATA).append('\n');
        String[] bodies = {
            fn + "pop %rbp\nret\n",
            fn + "add $1, %rax\npop %rbp\nret\n",
            fn + "pop %rbp\nret\n",
            """
            push %rbp
            mov %rsp, %rbp
            movabs $DATA, %r11
            mov (%r11), %rax
            test %rax, %rax
            jnz 1f
            mov 8(%rbp), %rax
            mov %rax, (%r11)
            1: pop %rbp
            ret
            """,
            """
            push %rbp
            mov %rsp, %rbp
            movabs $DATA, %r11
            mov 8(%r11), %rax
            test %rax, %rax
            jnz 1f
            mov 8(%rbp), %rax
            mov %rax, 8(%r11)
            1: mov 16(%r11), %rax
            test %rax, %rax
            jz 2f
            call *%rax
            2: movabs $DATA, %r11
            mov 8(%r11), %rax
            pop %rbp
            ret
            """,
            """
            push %rbp
            mov %rsp, %rbp
            movabs $DATA, %r11
            mov 24(%r11), %rax
            test %rax, %rax
            jz 1f
            call *%rax
            1: mov 8(%rbp), %rax
            pop %rbp
            ret
            """,
            "hlt\njmp halt_stub\n",
            // rip_load: the probe is on the RIP-relative load
            "mov rip_data(%rip), %rax\nret\n.balign 8\nrip_data: .quad 0x1122334455667788\n",
            // rel32_call: probe on the call
            "push %rbp\nmov %rsp, %rbp\ncall kprobe_target\nadd $100, %rax\npop %rbp\nret\n",
            // jcc_func: probe on jl (taken when rdi < 10, signed)
            "cmp $10, %rdi\njl 1f\nmov $1, %eax\nret\n1: mov $2, %eax\nret\n",
            // ret_func
            "mov %rdi, %rax\nret\n",
            // pushf_func: probe on pushf
            "pushf\npop %rax\nret\n",
            // fault_func: probe on the load; rdi may point to an unmapped page
            "mov (%rdi), %rax\nret\n",
            // pf_handler: records the faulting RIP, skips the 3-byte load, returns -1
            """
            push %r11
            push %r10
            movabs $DATA, %r11
            mov 24(%rsp), %r10
            mov %r10, 32(%r11)
            add $3, %r10
            mov %r10, 24(%rsp)
            mov $-1, %rax
            pop %r10
            pop %r11
            add $8, %rsp
            iretq
            """,
            // bp_handler: counts guest int3s
            "push %r11\nmovabs $DATA, %r11\nincq 40(%r11)\npop %r11\niretq\n",
            // int3_func: a breakpoint of the guest's own
            "int3\nmov $5, %eax\nret\n",
            // read_text(addr): the byte at addr
            "movzbl (%rdi), %eax\nret\n",
            // patch_text(addr, qword): the guest rewrites its own text
            "mov %rsi, (%rdi)\nret\n",
            // patchme: rewritten by patch_text
            "mov $1, %eax\nret\nnop\nnop\n",
            // loop_func(n): sum 1..n with loop
            "xor %eax, %eax\nmov %rdi, %rcx\n1: add %rcx, %rax\nloop 1b\nret\n",
            "mov %rdi, %rax\nret\n",
            // mul_loop(n): n iterations of a mixed-register body, the probe is on the imul
            """
            mov %rdi, %rcx
            mov $1, %rax
            mov $3, %rbx
            1: imul %rbx, %rax
            add %rcx, %rax
            xor %rax, %rbx
            lea 7(%rbx,%rcx,2), %rbx
            dec %rcx
            jnz 1b
            ret
            """,
            "push %rbp\nmov %rsp, %rbp\ntest %rdi, %rdi\njz 1f\ndec %rdi\ncall recurse\ninc %rax\npop %rbp\nret\n1: xor %eax, %eax\npop %rbp\nret\n",
            // ibt_func(x): x + 7, entered through an IBT landing pad as in kernels built with CONFIG_X86_KERNEL_IBT
            "endbr64\npush %rbp\nmov %rsp, %rbp\nlea 7(%rdi), %rax\npop %rbp\nret\n",
        };
        for (int i = 0; i < NAMES.length; i++) {
            s.append(".org ").append(0x100 * i).append('\n').append(NAMES[i]).append(":\n").append(bodies[i]).append('\n');
        }
        return s.toString();
    }

    static synchronized byte[] code() {
        if (code == null) code = Asm.x86(source(), TEXT);
        return code;
    }

    static X86Guest create() {
        X86Machine m = X86Machine.create(16 << 20);
        try {
            var mem = m.memory();
            X86LongMode.identityMap(mem, 0x1000, 16 << 20);        // PML4 0x1000, PDPT 0x2000, PD 0x3000
            mem.write(0x9000, new byte[0x1000]);
            mem.writeLong(0x1000 + 8 * 511, 0x9000 | 3);            // PML4[511] -> high PDPT
            mem.writeLong(0x9000 + 8 * 510, 0x3000 | 3);            // 0xffffffff80000000 -> PD of the first GiB
            int limit = X86LongMode.writeGdt(mem, 0x5000);
            X86LongMode.enter(m.engine(), KBASE + 0x5000, limit, 0x1000);
            mem.write(TEXT - KBASE, code());
            Map<String, Long> f = new LinkedHashMap<>();
            for (int i = 0; i < NAMES.length; i++) f.put(NAMES[i], TEXT + 0x100L * i);
            X86Guest g = new X86Guest(m, f);
            g.gate(14, f.get("pf_handler"));
            g.gate(3, f.get("bp_handler"));
            m.engine().mmrWrite(X86Reg.IDTR, new Unicorn.X86Mmr(0, IDT, 0xfff, 0));
            return g;
        } catch (RuntimeException e) {
            m.close();
            throw e;
        }
    }

    private void gate(int vector, long handler) {
        long lo = (handler & 0xffff) | ((long) X86LongMode.BOOT_CS << 16) | (0x8e00L << 32) | ((handler >>> 16) & 0xffff) << 48;
        machine.writeVirtualLong(IDT + 16L * vector, lo);
        machine.writeVirtualLong(IDT + 16L * vector + 8, handler >>> 32);
    }

    @Override
    void prepareCall(long fn, long returnTo, long[] args) {
        Unicorn uc = machine.engine();
        int[] regs = {X86Reg.RDI, X86Reg.RSI, X86Reg.RDX, X86Reg.RCX};
        for (int i = 0; i < args.length; i++) uc.regWrite(regs[i], args[i]);
        long sp = STACK_TOP - 8;
        machine.writeVirtualLong(sp, returnTo);
        uc.regWrite(X86Reg.RSP, sp);
        uc.regWrite(X86Reg.RBP, 0);
        machine.setPc(fn);
    }

    @Override
    long returnValue() { return machine.engine().regRead(X86Reg.RAX); }

    @Override long stackTop() { return STACK_TOP; }

    @Override long physical(long va) { return va - KBASE; }

    @Override byte[] asm(String src, long at) { return Asm.x86(src, at); }

    @Override
    int startCpu(long pc, long sp) {
        int cpu = machine.addCpu();
        Unicorn uc = machine.engine(cpu);
        int limit = X86LongMode.writeGdt(machine.memory(), 0x5000);   // the same bytes again: its limit
        X86LongMode.enter(uc, KBASE + 0x5000, limit, 0x1000);
        uc.mmrWrite(X86Reg.IDTR, new Unicorn.X86Mmr(0, IDT, 0xfff, 0));
        uc.regWrite(X86Reg.RSP, sp);
        machine.startCpu(cpu, pc);
        return cpu;
    }
}
