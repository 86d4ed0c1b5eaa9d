package dev.kpemu.kprobes;

import java.util.Map;

import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;

/**
 * Public access to the bare-metal kprobes test guests ({@link X86Guest}, {@link Arm64Guest}) for
 * tests in other packages (the kprobe-event engine's).
 */
public final class TestGuests {
    private TestGuests() {}

    /** A guest of {@code arch}: paging on, functions at kernel addresses, a data page. */
    public static Handle create(Arch arch) { return new Handle(Guest.create(arch)); }

    /** A created guest. */
    public static final class Handle implements AutoCloseable {
        private final Guest g;

        Handle(Guest g) { this.g = g; }

        public Machine machine() { return g.machine; }

        /** Every function and its address (each is {@link #FUNCTION_SIZE} bytes long). */
        public Map<String, Long> functions() { return g.functions; }

        public static final long FUNCTION_SIZE = Guest.FUNCTION_SIZE;

        public long sym(String name) { return g.sym(name); }

        /** Kernel-virtual address of the data page (free from offset 0x1000 on). */
        public long dataVa() { return g.dataVa; }

        public SymbolResolver symbols() { return g.symbols(); }

        /** A kprobes engine attached to the machine. */
        public Kprobes kprobes() { return g.kprobes(); }

        /** Calls a guest function with up to four arguments and returns its return value. */
        public long call(String fn, long... args) { return g.call(fn, args); }

        /** Address of the {@code nth} instruction with this mnemonic in {@code fn}. */
        public long find(String fn, String mnemonic, int nth) { return g.find(fn, mnemonic, nth); }

        /**
         * Writes a loop calling {@code fn(i)} for i = k..1 and halting after (see
         * {@code Guest.writeLoopCalling}); its address.
         */
        public long writeLoopCalling(long fn, int k) { return g.writeLoopCalling(fn, k); }

        /**
         * vCPU 0 and {@code n - 1} vCPUs added now (set up as vCPU 0: page tables, kernel mode; each
         * its own stack) start at {@code pc}; registers beyond those are the caller's.
         */
        public void startAll(int n, long pc) { g.startAll(n, pc); }

        @Override public void close() { g.close(); }
    }
}
