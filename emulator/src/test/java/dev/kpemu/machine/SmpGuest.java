package dev.kpemu.machine;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * The small bare-metal guest the SMP fact tests run on several engines at once: one RAM region of
 * host memory ({@link HostRam}) that every engine maps with {@code uc_mem_map_ptr}, paging off
 * (virtual = physical), and per arch the same few programs:
 * <ul>
 * <li>{@link #CALLER}: calls the function whose address is in the first argument register, then
 * stops (the run's {@code until} is the instruction after the call);</li>
 * <li>{@link #FUNC}: returns 1 in the result register ({@link #OLD_FUNC}); {@link #NEW_FUNC} is the
 * same 8 bytes returning 2;</li>
 * <li>{@link #WRITER}: one 8-byte guest store of the second argument register to the address in
 * the first.</li>
 * </ul>
 * The pages are apart, so no engine's own store ever hits a page it has translated code in.
 */
enum SmpGuest {
    X86 {
        @Override Unicorn open() {
            return Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64, Unicorn.CPU_X86_QEMU64);
        }
        @Override byte[] asm(String src, long at) { return Asm.x86(src, at); }
        @Override int pc() { return X86Reg.RIP; }
        @Override int sp() { return X86Reg.RSP; }
        @Override int result() { return X86Reg.RAX; }
        @Override int arg0() { return X86Reg.R9; }
        @Override int arg1() { return X86Reg.R10; }
        @Override String call() { return "call *%r9"; }
        @Override String function(int value) { return "mov $" + value + ", %eax\n ret\n nop\n nop"; }
        @Override String store() { return "mov %r10, (%r9)"; }
        @Override String nop() { return "nop"; }
    },
    ARM64 {
        @Override Unicorn open() {
            return Unicorn.open(Unicorn.ARCH_ARM64, Unicorn.MODE_ARM, Unicorn.CPU_ARM64_A57);
        }
        @Override byte[] asm(String src, long at) { return Asm.arm64(src, at); }
        @Override int pc() { return Arm64Reg.PC; }
        @Override int sp() { return Arm64Reg.SP; }
        @Override int result() { return Arm64Reg.X0; }
        @Override int arg0() { return Arm64Reg.X9; }
        @Override int arg1() { return Arm64Reg.X10; }
        @Override String call() { return "blr x9"; }
        @Override String function(int value) { return "mov x0, #" + value + "\n ret"; }
        @Override String store() { return "str x10, [x9]"; }
        @Override String nop() { return "nop"; }
    };

    static final long RAM = 0x10000, RAM_SIZE = 0x20000;
    static final long CALLER = RAM, FUNC = RAM + 0x1000, WRITER = RAM + 0x2000, SCRATCH = RAM + 0x3000,
            LOOP = RAM + 0x4000, DATA = RAM + 0x6000, STACK = RAM + 0x9000;
    /** An address in RAM never executed: {@code until} of runs that end by count or clock. */
    static final long NEVER = RAM + 0x1f000;

    abstract Unicorn open();
    abstract byte[] asm(String src, long at);
    abstract int pc();
    abstract int sp();
    abstract int result();
    abstract int arg0();
    abstract int arg1();
    abstract String call();
    abstract String function(int value);
    abstract String store();
    abstract String nop();

    /** The function returning {@code value}, 8 bytes. */
    byte[] functionBytes(int value) {
        byte[] b = asm(function(value), FUNC);
        if (b.length != 8) throw new IllegalStateException(this + ": function is " + b.length + " bytes, not 8");
        return b;
    }

    /** The 8 bytes of the function returning {@code value}, as one little-endian word (what {@link #WRITER} stores). */
    long functionWord(int value) {
        return ByteBuffer.wrap(functionBytes(value)).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    private int callLength = -1, storeLength = -1;

    /** Length of the call instruction at {@link #CALLER}: a call run's {@code until} is CALLER + this. */
    int callLength() {
        if (callLength < 0) callLength = asm(call(), CALLER).length;
        return callLength;
    }

    int storeLength() {
        if (storeLength < 0) storeLength = asm(store(), WRITER).length;
        return storeLength;
    }

    /** Writes the programs into RAM (host memory, in place) with the function returning 1. */
    void load(java.lang.foreign.MemorySegment ram) {
        put(ram, CALLER, asm(call() + "\n" + nop(), CALLER));
        put(ram, FUNC, functionBytes(1));
        put(ram, WRITER, asm(store() + "\n" + nop(), WRITER));
    }

    static void put(java.lang.foreign.MemorySegment ram, long pa, byte[] bytes) {
        java.lang.foreign.MemorySegment.copy(bytes, 0, ram, java.lang.foreign.ValueLayout.JAVA_BYTE, pa - RAM, bytes.length);
    }

    /** An engine with the shared RAM mapped. */
    Unicorn engine(HostRam ram) {
        Unicorn uc = open();
        uc.memMapPtr(RAM, RAM_SIZE, Unicorn.PROT_ALL, ram.segment());
        return uc;
    }

    /** Guest code on {@code uc}: calls {@link #FUNC} and returns what it returned. */
    long callFunction(Unicorn uc) {
        uc.regWrite(sp(), STACK);
        uc.regWrite(arg0(), FUNC);
        uc.start(CALLER, CALLER + callLength(), 0, 0);
        return uc.regRead(result());
    }

    /** Guest code on {@code uc}: one 8-byte store of {@code value} at {@code address}. */
    void guestStore(Unicorn uc, long address, long value) {
        uc.regWrite(arg0(), address);
        uc.regWrite(arg1(), value);
        uc.start(WRITER, WRITER + storeLength(), 0, 0);
    }
}
