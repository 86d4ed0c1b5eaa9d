package dev.kpemu.kprobes.x86;


import dev.kpemu.kprobes.ArchInsn;
import dev.kpemu.kprobes.ArchKprobes;
import dev.kpemu.kprobes.ArchSiteRules;
import dev.kpemu.kprobes.Errno;
import dev.kpemu.kprobes.KprobeException;
import dev.kpemu.kprobes.Regs;
import dev.kpemu.kprobes.SlotArea;
import dev.kpemu.kprobes.SymbolResolver;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * x86-64 kprobes ({@code arch/x86/kernel/kprobes/core.c}, the ≥ 5.11 int3 design): {@code int3}
 * at the probe; a copy of the instruction in a 16-byte slot with its RIP-relative displacement
 * fixed up, followed by a second {@code int3} (or by {@code jmp rel32} back when boosted);
 * branches, calls, returns, loop/jrcxz, cli/sti and pushf/popf emulated in Java.
 */
public final class X86Kprobes implements ArchKprobes {
    /** x86 kernels have {@code CONFIG_KPROBES_ON_FTRACE}; no exception-table refusal in {@code arch_prepare_kprobe}. */
    public static final ArchSiteRules SITE_RULES = new ArchSiteRules(true, false);
    private static final byte INT3 = (byte) 0xcc;
    private static final long RF = 1 << 16, VM = 1 << 17, IF = 1 << 9;
    private static final long CF = 1, PF = 1 << 2, ZF = 1 << 6, SF = 1 << 7, OF = 1 << 11;
    /** Instructions a guest call from a handler may run before it is considered stuck. */

    private final Machine machine;
    private final X86Regs regs;
    private final X86ProbeDecoder probeDecoder = new X86ProbeDecoder();

    public X86Kprobes(Machine machine) {
        this.machine = machine;
        this.regs = new X86Regs(machine);
    }

    @Override public Arch arch() { return Arch.X86_64; }

    @Override public byte[] breakpoint() { return new byte[] {INT3}; }

    @Override public long trapIp(long address) { return address + 1; }

    /** #PF. */
    @Override public int memoryFaultTrap() { return 14; }

    @Override public int maxInstructionLength() { return 16; }

    @Override public dev.kpemu.kprobes.LiveRegs regs() { return regs; }

    /** {@code struct pt_regs}' registers (orig_ax aside: 0 at an ftrace site) and GS_BASE, which finds the per-CPU area. */
    private static final String[] RECORDED = {"r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx",
            "rdx", "rsi", "rdi", "rip", "cs", "rflags", "rsp", "ss", "gs_base"};

    @Override public String[] recordedRegisters() { return RECORDED.clone(); }

    /** At an ftrace site (a function's first instruction but for endbr): the return address at [rsp], the frame key rsp. */
    @Override public ReturnSlot recordedReturnSlot() { return new ReturnSlot("rsp", 0, false, "rsp", -8); }

    // ------------------------------------------------------------------ prepare

    @Override
    public ArchInsn prepare(long address, TextReader text, SymbolResolver.SymbolInfo symbol) {
        return probeDecoder.prepare(address, text, symbol);
    }

    @Override
    public boolean isExceptionInstruction(long address, TextReader text) {
        return probeDecoder.isExceptionInstruction(address, text);
    }

    @Override
    public ProbeAddress adjustAddress(long functionStart, long offset, TextReader text) {
        return probeDecoder.adjustAddress(functionStart, offset, text);
    }

    // ------------------------------------------------------------------ slots

    @Override
    public byte[] slotCode(ArchInsn archInsn, long address, long slot, boolean boost) {
        X86Insn insn = (X86Insn) archInsn;
        byte[] copy;
        try {
            copy = insn.decoded().relocatedTo(slot);
        } catch (IllegalArgumentException e) {
            throw new KprobeException(Errno.EINVAL, "Kprobes error: new displacement does not fit into s32 (" + e.getMessage() + ")");
        }
        int len = copy.length;
        byte[] code = new byte[SlotArea.SLOT_SIZE];
        java.util.Arrays.fill(code, INT3);
        System.arraycopy(copy, 0, code, 0, len);
        if (boost) {
            long rel = address + len - (slot + len + 5);
            code[len] = (byte) 0xe9;
            for (int k = 0; k < 4; k++) code[len + 1 + k] = (byte) (rel >>> (8 * k));
        }
        return code;
    }

    @Override
    public boolean canBoost(ArchInsn archInsn, long address, long slot) {
        X86Insn insn = (X86Insn) archInsn;
        long rel = address + insn.length() - (slot + insn.length() + 5);
        return insn.boostable() && SlotArea.SLOT_SIZE - insn.length() >= 5 && rel == (int) rel;
    }

    @Override
    public int stepTrapOffset(ArchInsn insn) { return insn.length(); }

    @Override
    public byte[] trampolineCode() { return new byte[] {INT3}; }

    // ------------------------------------------------------------------ emulation

    @Override
    public void simulate(ArchInsn archInsn, long address, Regs r) {
        X86Insn insn = (X86Insn) archInsn;
        long next = insn.next();
        switch (insn.kind()) {
            case JMP -> regs.setIp(insn.target());
            case JCC -> regs.setIp(condition(insn.cond(), regs.flags()) ? insn.target() : next);
            case CALL -> {
                regs.push(next);
                regs.setIp(insn.target());
            }
            case RET -> {
                long ret = regs.pop();
                regs.setSp(regs.sp() + insn.popExtra());
                regs.setIp(ret);
            }
            case LOOP, JRCXZ -> regs.setIp(loop(insn) ? insn.target() : next);
            case CALL_REG -> {
                long target = regs.gpr(insn.reg());
                regs.push(next);
                regs.setIp(target);
            }
            case JMP_REG -> regs.setIp(regs.gpr(insn.reg()));
            case CLI -> {
                regs.setFlags(regs.flags() & ~IF);
                regs.setIp(next);
            }
            case STI -> {
                regs.setFlags(regs.flags() | IF);
                regs.setIp(next);
            }
            case PUSHF -> {
                regs.push(regs.flags() & ~(RF | VM));
                regs.setIp(next);
            }
            case POPF -> {
                regs.setFlags((regs.pop() & 0x3f7fd7L) | 2);
                regs.setIp(next);
            }
            case COPY -> throw new IllegalStateException("copied instructions run from a slot");
        }
    }

    /** Architectural LOOPcc/JrCXZ: the count is decremented first (unlike the kernel's emulation, see the reference). */
    private boolean loop(X86Insn insn) {
        long count = insn.addr32() ? regs.gpr(1) & 0xffff_ffffL : regs.gpr(1);
        if (insn.kind() == X86Insn.Kind.JRCXZ) return count == 0;
        count = insn.addr32() ? (count - 1) & 0xffff_ffffL : count - 1;
        regs.setGpr(1, count);
        boolean zf = (regs.flags() & ZF) != 0;
        return switch (insn.cond()) {
            case 0xe0 -> count != 0 && !zf;
            case 0xe1 -> count != 0 && zf;
            default -> count != 0;
        };
    }

    /** {@code __emulate_cc}. */
    static boolean condition(int cc, long flags) {
        boolean cf = (flags & CF) != 0, zf = (flags & ZF) != 0, sf = (flags & SF) != 0, of = (flags & OF) != 0, pf = (flags & PF) != 0;
        boolean match = switch (cc >> 1) {
            case 0 -> of;
            case 1 -> cf;
            case 2 -> zf;
            case 3 -> cf || zf;
            case 4 -> sf;
            case 5 -> pf;
            case 6 -> sf != of;
            default -> (sf != of) || zf;
        };
        return match ^ ((cc & 1) != 0);
    }

    // ------------------------------------------------------------------ kretprobes and unwinding

    @Override
    public void overrideFunctionWithReturn(Regs r, long retval) {
        long sp = r.sp();
        r.setReturnValue(retval);
        r.setIp(r.readLong(sp));
        r.setSp(sp + 8);
    }

    @Override
    public long returnAddressAtEntry(Regs r) { return r.readLong(r.sp()); }

    /** One page walk for both the read and the write of {@code [rsp]}. */
    @Override
    public long swapReturnAddress(Regs r, long trampoline) {
        long sp = regs.sp();
        var t = machine.translateOrThrow(sp);
        if ((sp & (t.pageSize() - 1)) > t.pageSize() - 8) {
            long old = machine.readVirtualLong(sp);
            machine.writeVirtualLong(sp, trampoline);
            return old;
        }
        long old = machine.memory().readLong(t.physical());
        machine.memory().writeLong(t.physical(), trampoline);
        return old;
    }

    @Override public long entryFrame(Regs r) { return regs.sp(); }

    /** After {@code ret} popped the trampoline's address, the return-address slot is just below rsp. */
    @Override public long returnFrame(Regs r) { return regs.sp() - 8; }

    @Override
    public void walkFrames(Regs r, FrameVisitor visitor) {
        long fp = regs.gpr(5);
        for (int depth = 0; depth < 64 && fp != 0; depth++) {
            long ret, next;
            try {
                ret = machine.readVirtualLong(fp + 8);
                next = machine.readVirtualLong(fp);
            } catch (Machine.GuestMemoryException e) {
                return;
            }
            if (ret == 0 || !visitor.visit(ret, fp + 8)) return;
            if (Long.compareUnsigned(next, fp) <= 0) return;
            fp = next;
        }
    }

    @Override
    public void close() { probeDecoder.close(); }
}
