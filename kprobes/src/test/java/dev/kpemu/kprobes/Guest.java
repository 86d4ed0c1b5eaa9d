package dev.kpemu.kprobes;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.StopReason;

/**
 * A bare-metal guest "kernel" for kprobes tests, the same on both arches: paging on, text at a
 * kernel-style virtual address, functions with frame records named as in Linux's kprobes KUnit
 * suite, a data page, exception handlers, and a slot area mapped by the engine itself.
 */
abstract class Guest implements AutoCloseable {
    /** Data words (offsets in the data page). */
    static final int RET_ADDR0 = 0x00, RET_ADDR1 = 0x08, INTERNAL_PTR = 0x10, TARGET_PTR = 0x18,
            FAULT_PC = 0x20, BP_COUNT = 0x28, FAULT_INFO = 0x30, SCRATCH = 0x100;

    static final long FUNCTION_SIZE = 0x100;

    final Machine machine;
    final Map<String, Long> functions;
    final long dataVa;
    final SlotArea slots;
    private final long haltStub;

    Guest(Machine machine, Map<String, Long> functions, long dataVa, SlotArea slots, long haltStub) {
        this.machine = machine;
        this.functions = functions;
        this.dataVa = dataVa;
        this.slots = slots;
        this.haltStub = haltStub;
    }

    static Guest create(Arch arch) {
        return switch (arch) {
            case X86_64 -> X86Guest.create();
            case ARM64 -> Arm64Guest.create();
        };
    }

    long sym(String name) {
        Long a = functions.get(name);
        if (a == null) throw new IllegalArgumentException("no guest function " + name);
        return a;
    }

    /** Every function is 0x100 bytes in the symbol table (the next one starts there). */
    SymbolResolver symbols() {
        List<SymbolResolver.SymbolInfo> l = new ArrayList<>();
        functions.forEach((n, a) -> l.add(new SymbolResolver.SymbolInfo(n, a, FUNCTION_SIZE, true)));
        return SymbolResolver.of(l);
    }

    Kprobes kprobes() { return Kprobes.attach(machine, symbols(), slots); }

    long data(int offset) { return machine.readVirtualLong(dataVa + offset); }

    void setData(int offset, long v) { machine.writeVirtualLong(dataVa + offset, v); }

    /** Calls a guest function from the "test module" and returns its return value. */
    long call(String fn, long... args) {
        prepareCall(sym(fn), haltStub, args);
        StopReason r = machine.run(50_000_000);
        if (!(r instanceof StopReason.Halted)) throw new AssertionError("call of " + fn + " ended with " + r);
        return returnValue();
    }

    abstract void prepareCall(long fn, long returnTo, long[] args);

    /**
     * Adds a vCPU ({@link Machine#addCpu}) set up as vCPU 0 (the same page tables, descriptor or
     * vector tables, kernel mode), with stack pointer {@code sp}, and starts it at {@code pc}.
     */
    abstract int startCpu(long pc, long sp);

    /** The stack top of vCPU 0 ({@link #call}'s); vCPU i's is 16 KiB below per index ({@link #startAll}). */
    abstract long stackTop();

    /** The physical address of kernel-virtual {@code va} in the guest's linear maps. */
    abstract long physical(long va);

    /** Assembles {@code src} at {@code at} for the guest's arch. */
    abstract byte[] asm(String src, long at);

    /** Where loops of {@link #writeLoopCalling} go: past the guest's functions, in the same text mapping. */
    long loopCode() { return sym("kprobe_target") + 0x4000; }

    /**
     * Writes at {@link #loopCode()} a program that calls {@code fn(i)} for i = k..1, summing the
     * results (x86-64 r13, arm64 x21), then halts for good (interrupts off); returns its address.
     */
    long writeLoopCalling(long fn, int k) {
        long at = loopCode();
        String src = switch (machine.arch()) {
            case X86_64 -> "mov $" + k + ", %r12\n xor %r13d, %r13d\n"
                    + "1: mov %r12, %rdi\n movabs $" + fn + ", %rax\n call *%rax\n add %rax, %r13\n dec %r12\n jnz 1b\n"
                    + "2: cli\n hlt\n jmp 2b\n";
            case ARM64 -> "mov x29, sp\n" + Arm64Guest.mov64("x19", k) + "mov x21, #0\n" + Arm64Guest.mov64("x20", fn)
                    + "again:\n mov x0, x19\n blr x20\n add x21, x21, x0\n subs x19, x19, #1\n b.ne again\n"
                    + "idle:\n wfi\n b idle\n";
        };
        machine.memory().write(physical(at), asm(src, at));
        return at;
    }

    /** vCPU 0 and {@code n - 1} added vCPUs ({@link #startCpu}) start at {@code pc}, each on its own stack. */
    void startAll(int n, long pc) {
        machine.engine().regWrite(machine.arch() == dev.kpemu.machine.Arch.X86_64 ? dev.kpemu.unicorn.X86Reg.RSP : dev.kpemu.unicorn.Arm64Reg.SP, stackTop());
        machine.setPc(pc);
        for (int cpu = 1; cpu < n; cpu++) {
            int added = startCpu(pc, stackTop() - 0x4000L * cpu);
            if (added != cpu) throw new IllegalStateException("vCPU " + added + " added, " + cpu + " expected");
        }
    }

    abstract long returnValue();

    /** Address of the instruction at byte offset {@code off} of function {@code fn}. */
    long at(String fn, int off) { return sym(fn) + off; }

    /** Address of the {@code nth} (0-based) instruction of {@code fn} whose mnemonic is {@code mnemonic}. */
    long find(String fn, String mnemonic, int nth) {
        byte[] text = machine.readVirtual(sym(fn), (int) FUNCTION_SIZE);
        try (dev.kpemu.decoder.Decoder d = dev.kpemu.decoder.Decoder.open(machine.arch())) {
            int seen = 0;
            for (var insn : d.decodeAll(text, sym(fn)).instructions()) {
                if (insn.mnemonic().equals(mnemonic) && seen++ == nth) return insn.address();
            }
        }
        throw new IllegalArgumentException("no " + mnemonic + " #" + nth + " in " + fn);
    }

    long find(String fn, String mnemonic) { return find(fn, mnemonic, 0); }

    @Override
    public void close() { machine.close(); }
}
