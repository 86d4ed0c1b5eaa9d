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
