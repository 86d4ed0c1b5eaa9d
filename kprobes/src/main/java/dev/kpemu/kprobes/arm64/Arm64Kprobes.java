package dev.kpemu.kprobes.arm64;


import dev.kpemu.kprobes.ArchInsn;
import dev.kpemu.kprobes.ArchKprobes;
import dev.kpemu.kprobes.ArchSiteRules;
import dev.kpemu.kprobes.Regs;
import dev.kpemu.kprobes.SymbolResolver;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;

/**
 * arm64 kprobes ({@code arch/arm64/kernel/probes}, the ≥ 5.16 BRK design): {@code BRK #4} at the
 * probe; steppable instructions copied into a slot followed by {@code BRK #6} (or by {@code B}
 * back when boosted and in range); B, BL, B.cond, CBZ/CBNZ, TBZ/TBNZ, ADR, ADRP, LDR/LDRSW
 * literal, BR, BLR, RET and NOP simulated in Java; exclusive sequences and the kernel's other
 * rejected classes refused with EINVAL. The kretprobe trampoline is {@code BRK #7}.
 */
public final class Arm64Kprobes implements ArchKprobes {
    /** arm64 has no {@code KPROBES_ON_FTRACE}; its {@code arch_prepare_kprobe} refuses instructions with an exception-table entry. */
    public static final ArchSiteRules SITE_RULES = new ArchSiteRules(false, true);
    public static final int BRK_KPROBE = 0xd420_0080, BRK_SS = 0xd420_00c0, BRK_KRETPROBE = 0xd420_00e0;

    private final Machine machine;
    private final Arm64Regs regs;
    private final Arm64ProbeDecoder probeDecoder = new Arm64ProbeDecoder();

    public Arm64Kprobes(Machine machine) {
        this.machine = machine;
        this.regs = new Arm64Regs(machine);
    }

    @Override public Arch arch() { return Arch.ARM64; }

    @Override public byte[] breakpoint() { return le(BRK_KPROBE); }

    @Override public long trapIp(long address) { return address; }

    /** ESR_ELx_EC_DABT_CUR: a data abort taken without a change of exception level. */
    @Override public int memoryFaultTrap() { return 0x25; }

    @Override public int maxInstructionLength() { return 4; }

    @Override public dev.kpemu.kprobes.LiveRegs regs() { return regs; }

    // ------------------------------------------------------------------ prepare

    @Override
    public ArchInsn prepare(long address, TextReader text, SymbolResolver.SymbolInfo symbol) {
        return probeDecoder.prepare(address, text, symbol);
    }

    // ------------------------------------------------------------------ slots

    /** pt_regs (x0–x30, sp, pc, pstate) and SP_EL0, the kernel's {@code current}: what a hit's handlers and context columns read. */
    private static final String[] RECORDED;

    static {
        // the ones every hit reads first (the task, the interrupt mask, the ip): each lookup by name is a scan
        String[] r = new String[35];
        r[0] = "sp_el0";
        r[1] = "pstate";
        r[2] = "pc";
        r[3] = "sp";
        for (int i = 0; i <= 30; i++) r[4 + i] = ("x" + i).intern();
        RECORDED = r;
    }

    @Override public String[] recordedRegisters() { return RECORDED.clone(); }

    /** At a function's entry: the return address in lr, the frame key the caller's x29 ({@link #entryFrame}). */
    @Override public ReturnSlot recordedReturnSlot() { return new ReturnSlot("x30", 0, true, "x29", 0); }

    @Override public dev.kpemu.kprobes.Regs.Entry recordedEntry() { return dev.kpemu.kprobes.Regs.Entry.BREAKPOINT; }

    @Override
    public byte[] slotCode(ArchInsn insn, long address, long slot, boolean boost) {
        int w = ((Arm64Insn) insn).word();
        int tail = boost ? branch(slot + 4, address + 4) : BRK_SS;
        byte[] code = new byte[8];
        System.arraycopy(le(w), 0, code, 0, 4);
        System.arraycopy(le(tail), 0, code, 4, 4);
        return code;
    }

    @Override
    public boolean canBoost(ArchInsn insn, long address, long slot) {
        long d = address + 4 - (slot + 4);
        return insn.boostable() && d >= -(1L << 27) && d < (1L << 27);
    }

    private static int branch(long from, long to) {
        return 0x14000000 | (int) (((to - from) >> 2) & 0x03ffffff);
    }

    @Override public int stepTrapOffset(ArchInsn insn) { return 4; }

    @Override public byte[] trampolineCode() { return le(BRK_KRETPROBE); }

    // ------------------------------------------------------------------ simulation (simulate-insn.c)

    @Override
    public void simulate(ArchInsn archInsn, long addr, Regs r) {
        Arm64Insn insn = (Arm64Insn) archInsn;
        int w = insn.word();
        int rt = w & 0x1f;
        long next = addr + 4;
        switch (insn.kind()) {
            case B, BL -> {
                if (insn.kind() == Arm64Insn.Kind.BL) regs.setXzr(30, next);
                regs.setIp(addr + (sext(w & 0x03ffffff, 26) << 2));
            }
            case B_COND -> regs.setIp(condition(w & 0xf, regs.nzcv()) ? addr + imm19(w) : next);
            case CBZ, CBNZ -> {
                long v = regs.xzr(rt);
                if ((w >>> 31) == 0) v &= 0xffff_ffffL;
                boolean taken = insn.kind() == Arm64Insn.Kind.CBZ ? v == 0 : v != 0;
                regs.setIp(taken ? addr + imm19(w) : next);
            }
            case TBZ, TBNZ -> {
                int bit = ((w >>> 31) << 5) | ((w >>> 19) & 0x1f);
                boolean set = ((regs.xzr(rt) >>> bit) & 1) != 0;
                boolean taken = insn.kind() == Arm64Insn.Kind.TBZ ? !set : set;
                regs.setIp(taken ? addr + (sext((w >>> 5) & 0x3fff, 14) << 2) : next);
            }
            case ADR, ADRP -> {
                long imm = sext(((w >>> 5) & 0x7ffff) << 2 | ((w >>> 29) & 3), 21);
                regs.setXzr(rt, insn.kind() == Arm64Insn.Kind.ADRP ? (addr & ~0xfffL) + (imm << 12) : addr + imm);
                regs.setIp(next);
            }
            case LDR_LITERAL -> {
                long a = addr + imm19(w);
                long v = ((w >>> 30) & 1) != 0 ? machine.readVirtualLong(a) : machine.readVirtualLong(a) & 0xffff_ffffL;
                regs.setXzr(rt, v);
                regs.setIp(next);
            }
            case LDRSW_LITERAL -> {
                regs.setXzr(rt, (long) (int) machine.readVirtualLong(addr + imm19(w)));
                regs.setIp(next);
            }
            case BR, BLR, RET -> {
                long target = regs.xzr((w >>> 5) & 0x1f);
                if (insn.kind() == Arm64Insn.Kind.BLR) regs.setXzr(30, next);
                regs.setIp(target);
            }
            case NOP -> regs.setIp(next);
            case COPY -> throw new IllegalStateException("copied instructions run from a slot");
        }
    }

    private static long imm19(int w) { return sext((w >>> 5) & 0x7ffff, 19) << 2; }

    private static long sext(long v, int bits) { return (v << (64 - bits)) >> (64 - bits); }

    /** The A64 condition table on NZCV (bits 31–28 of the NZCV register). */
    static boolean condition(int cond, long nzcv) {
        boolean n = ((nzcv >>> 31) & 1) != 0, z = ((nzcv >>> 30) & 1) != 0, c = ((nzcv >>> 29) & 1) != 0, v = ((nzcv >>> 28) & 1) != 0;
        boolean r = switch (cond >> 1) {
            case 0 -> z;
            case 1 -> c;
            case 2 -> n;
            case 3 -> v;
            case 4 -> c && !z;
            case 5 -> n == v;
            case 6 -> n == v && !z;
            default -> true;
        };
        return (cond & 1) != 0 && cond != 0xf ? !r : r;
    }

    // ------------------------------------------------------------------ kretprobes and unwinding

    @Override
    public void overrideFunctionWithReturn(Regs r, long retval) {
        r.setReturnValue(retval);
        r.setIp(regs.xzr(30));
    }

    @Override
    public long returnAddressAtEntry(Regs r) { return regs.xzr(30); }

    @Override
    public long swapReturnAddress(Regs r, long trampoline) {
        long old = regs.xzr(30);
        regs.setXzr(30, trampoline);
        return old;
    }

    /** The caller's frame pointer (x29 at entry), as Linux 6.x matches kretprobe instances. */
    @Override public long entryFrame(Regs r) { return regs.xzr(29); }

    @Override public long returnFrame(Regs r) { return regs.xzr(29); }

    @Override
    public void walkFrames(Regs r, FrameVisitor visitor) {
        long fp = regs.xzr(29);
        for (int depth = 0; depth < 64 && fp != 0; depth++) {
            long ret, next;
            try {
                next = machine.readVirtualLong(fp);
                ret = machine.readVirtualLong(fp + 8);
            } catch (Machine.GuestMemoryException e) {
                return;
            }
            if (ret == 0 || !visitor.visit(ret, next)) return;
            if (Long.compareUnsigned(next, fp) <= 0) return;
            fp = next;
        }
    }

    @Override
    public void close() { probeDecoder.close(); }

    static int word(byte[] b, int off) {
        return (b[off] & 0xff) | (b[off + 1] & 0xff) << 8 | (b[off + 2] & 0xff) << 16 | (b[off + 3] & 0xff) << 24;
    }

    static byte[] le(int w) {
        return new byte[] {(byte) w, (byte) (w >>> 8), (byte) (w >>> 16), (byte) (w >>> 24)};
    }
}
