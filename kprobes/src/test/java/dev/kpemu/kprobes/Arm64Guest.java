package dev.kpemu.kprobes;

import java.io.ByteArrayOutputStream;
import java.util.LinkedHashMap;
import java.util.Map;

import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;

/**
 * arm64 guest: the first 32 MiB of RAM mapped at the kernel VA {@code 0xffff000000000000} with
 * 2 MiB blocks through TTBR1 (48-bit, 4 KiB granule), MMU turned on by the host; text at
 * {@code +0x100000}, vectors at {@code +0x30000}; the slot area at {@code +0x4000000} (within B range of the text), outside
 * the mapped blocks, backed by RAM at +48 MiB.
 */
final class Arm64Guest extends Guest {
    static final long RAM = Arm64Layout.RAM_BASE;
    static final long KVA = 0xffff_0000_0000_0000L;
    static final long TEXT = KVA + 0x10_0000, DATA = KVA + 0x20_0000, STACK_TOP = KVA + 0x8_0000, VBAR = KVA + 0x3_0000;
    static final long SLOT_VA = KVA + 0x400_0000L, SLOT_PA = RAM + 0x300_0000;
    static final long TABLES_PA = RAM + 0x40_0000;
    static final long MAIR = 0xffL, TCR = 0x5_b510_3510L, SCTLR_MMU_ON = 0x30d0_1805L;
    static final int RET = 0xd65f03c0;

    static final String[] NAMES = {
        "kprobe_target", "kprobe_target2", "kprobe_recursed_target", "kprobe_stacktrace_internal_target",
        "kprobe_stacktrace_target", "kprobe_stacktrace_driver", "halt_stub", "adrp_func", "ldr_literal_func",
        "bl_func", "cbz_func", "tbz_func", "blr_func", "fault_func", "brk_func", "read_text", "patch_text",
        "patchme", "mul_loop", "nokprobe_func", "ldxr_func", "ldrsw_literal_func", "recurse",
    };

    private static byte[] code;

    private Arm64Guest(Arm64Machine m, Map<String, Long> f) {
        super(m, f, DATA, new SlotArea(SLOT_VA, SLOT_PA, 0x20_0000), f.get("halt_stub"));
    }

    static String mov64(String reg, long v) {
        return String.format("movz %s, #0x%x, lsl #48\nmovk %s, #0x%x, lsl #32\nmovk %s, #0x%x, lsl #16\nmovk %s, #0x%x\n",
                reg, (v >>> 48) & 0xffff, reg, (v >>> 32) & 0xffff, reg, (v >>> 16) & 0xffff, reg, v & 0xffff);
    }

    /** Builds a function from assembly chunks (Strings) and literal words (Integers / Longs). */
    static byte[] fn(Object... parts) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (Object p : parts) {
            if (p instanceof String s) out.writeBytes(Asm.arm64(s, 0));
            else if (p instanceof Integer w) out.writeBytes(new byte[] {(byte) (int) w, (byte) (w >>> 8), (byte) (w >>> 16), (byte) (w >>> 24)});
            else if (p instanceof Long l) for (int i = 0; i < 8; i++) out.write((int) (l >>> (8 * i)));
        }
        return out.toByteArray();
    }

    static long addr(String name) {
        for (int i = 0; i < NAMES.length; i++) if (NAMES[i].equals(name)) return TEXT + 0x100L * i;
        throw new IllegalArgumentException(name);
    }

    static int bl(long from, long to) { return 0x94000000 | (int) (((to - from) >> 2) & 0x03ffffff); }

    static int adrp(int rd, long pc, long target) {
        long imm = ((target & ~0xfffL) - (pc & ~0xfffL)) >> 12;
        return 0x90000000 | (int) ((imm & 3) << 29) | (int) (((imm >> 2) & 0x7ffff) << 5) | rd;
    }

    static synchronized byte[] code() {
        if (code != null) return code;
        String prologue = "stp x29, x30, [sp, #-16]!\nmov x29, sp\n";
        String epilogue = "ldp x29, x30, [sp], #16\nret\n";
        String div = prologue + "mov x1, #3\nudiv x0, x0, x1\n";
        byte[][] bodies = {
            fn(div + epilogue),
            fn(div + "add x0, x0, #1\n" + epilogue),
            fn(div + epilogue),
            fn(prologue + mov64("x9", DATA) + """
                ldr x0, [x9]
                cbnz x0, done
                ldr x0, [x29, #8]
                str x0, [x9]
                done:
                """ + epilogue),
            fn(prologue + mov64("x9", DATA) + """
                ldr x0, [x9, #8]
                cbnz x0, have
                ldr x0, [x29, #8]
                str x0, [x9, #8]
                have:
                ldr x10, [x9, #16]
                cbz x10, skip
                blr x10
                skip:
                """ + mov64("x9", DATA) + "ldr x0, [x9, #8]\n" + epilogue),
            fn(prologue + mov64("x9", DATA) + """
                ldr x10, [x9, #24]
                cbz x10, skip
                blr x10
                skip:
                ldr x0, [x29, #8]
                """ + epilogue),
            fn("wfi\nb #-4\n"),
            fn(adrp(0, addr("adrp_func"), DATA + 0x1234), RET),
            fn(0x58000040, RET, 0x1122334455667788L),                       // ldr x0, #8; ret; .quad
            fn(prologue, bl(addr("bl_func") + 8, addr("kprobe_target")), "add x0, x0, #100\n" + epilogue),
            fn("cbz x0, zero\nmov x0, #1\nret\nzero:\nmov x0, #2\nret\n"),
            fn("tbz x0, #3, clear\nmov x0, #1\nret\nclear:\nmov x0, #2\nret\n"),
            fn(prologue + mov64("x10", addr("kprobe_target2")) + "blr x10\n" + epilogue),
            fn("ldr x0, [x0]\nret\n"),
            fn("brk #0x100\nmov x0, #5\nret\n"),
            fn("ldr w0, [x0]\nret\n"),
            fn("str x1, [x0]\nret\n"),
            fn("mov x0, #1\nret\nnop\nnop\n"),
            fn("""
                mov x2, x0
                mov x0, #1
                mov x1, #3
                loop:
                mul x0, x0, x1
                add x0, x0, x2
                eor x1, x1, x0
                add x1, x1, x2, lsl #1
                subs x2, x2, #1
                b.ne loop
                ret
                """),
            fn("mov x0, x0\nret\n"),
            fn("retry:\nldxr x1, [x0]\nadd x1, x1, #1\nstxr w2, x1, [x0]\ncbnz w2, retry\nret\n"),
            fn(0x98000040, RET, 0x00000000_fffffff0L),                      // ldrsw x0, #8; ret; .word -16
            fn("recurse:\n" + prologue + "cbz x0, zero\nsub x0, x0, #1\nbl recurse\nadd x0, x0, #1\nzero:\n" + epilogue),
        };
        byte[] all = new byte[0x100 * NAMES.length];
        for (int i = 0; i < bodies.length; i++) {
            if (bodies[i].length > 0x100) throw new IllegalStateException(NAMES[i] + " too long");
            System.arraycopy(bodies[i], 0, all, 0x100 * i, bodies[i].length);
        }
        return code = all;
    }

    static byte[] syncHandler() {
        return fn(mov64("x9", DATA) + """
                mrs x10, esr_el1
                lsr x10, x10, #26
                cmp x10, #0x3c
                b.ne abort
                ldr x10, [x9, #40]
                add x10, x10, #1
                str x10, [x9, #40]
                b skip
                abort:
                mrs x10, elr_el1
                str x10, [x9, #32]
                mrs x10, esr_el1
                str x10, [x9, #48]
                movn x0, #0
                skip:
                mrs x10, elr_el1
                add x10, x10, #4
                msr elr_el1, x10
                eret
                """);
    }

    static Arm64Guest create() {
        Arm64Machine m = Arm64Machine.create(64L << 20);
        try {
            var mem = m.memory();
            long next = TABLES_PA;
            long root0 = next, root1 = next + 0x1000, l1 = next + 0x2000, l2 = next + 0x3000;
            mem.write(next, new byte[0x4000]);
            mem.writeLong(root1 + 8 * ((KVA >>> 39) & 0x1ff), l1 | 3);
            mem.writeLong(l1 + 8 * ((KVA >>> 30) & 0x1ff), l2 | 3);
            long attrs = (1L << 10) | (3L << 8) | 1;                       // AF, inner shareable, attr0 normal, block
            for (int i = 0; i < 16; i++) mem.writeLong(l2 + 8L * i, (RAM + ((long) i << 21)) | attrs);
            mem.write(TEXT - KVA + RAM, code());
            mem.write(VBAR - KVA + RAM + 0x200, syncHandler());
            m.setSysReg(3, 0, 10, 2, 0, MAIR);
            m.setSysReg(3, 0, 2, 0, 2, TCR);
            m.setReg(Arm64Reg.TTBR0_EL1, root0);
            m.setReg(Arm64Reg.TTBR1_EL1, root1);
            m.setSysReg(3, 0, 1, 0, 0, SCTLR_MMU_ON);
            m.setReg(Arm64Reg.VBAR_EL1, VBAR);
            m.engine().flushTlb();
            Map<String, Long> f = new LinkedHashMap<>();
            for (int i = 0; i < NAMES.length; i++) f.put(NAMES[i], TEXT + 0x100L * i);
            return new Arm64Guest(m, f);
        } catch (RuntimeException e) {
            m.close();
            throw e;
        }
    }

    @Override
    void prepareCall(long fn, long returnTo, long[] args) {
        Arm64Machine m = (Arm64Machine) machine;
        for (int i = 0; i < args.length; i++) m.setReg(Arm64Reg.X0 + i, args[i]);
        m.setReg(Arm64Reg.X30, returnTo);
        m.setReg(Arm64Reg.X29, 0);
        m.setReg(Arm64Reg.SP, STACK_TOP);
        m.setPc(fn);
    }

    @Override
    long returnValue() { return ((Arm64Machine) machine).reg(Arm64Reg.X0); }

    @Override long stackTop() { return STACK_TOP; }

    @Override long physical(long va) { return va - KVA + RAM; }

    @Override byte[] asm(String src, long at) { return Asm.arm64(src, at); }

    @Override
    int startCpu(long pc, long sp) {
        int cpu = machine.addCpu();
        Unicorn uc = machine.engine(cpu);
        uc.sysRegWrite(3, 0, 10, 2, 0, MAIR);
        uc.sysRegWrite(3, 0, 2, 0, 2, TCR);
        uc.regWrite(Arm64Reg.TTBR0_EL1, TABLES_PA);
        uc.regWrite(Arm64Reg.TTBR1_EL1, TABLES_PA + 0x1000);
        uc.sysRegWrite(3, 0, 1, 0, 0, SCTLR_MMU_ON);
        uc.regWrite(Arm64Reg.VBAR_EL1, VBAR);
        uc.flushTlb();
        uc.regWrite(Arm64Reg.SP, sp);
        machine.startCpu(cpu, pc);
        return cpu;
    }
}
