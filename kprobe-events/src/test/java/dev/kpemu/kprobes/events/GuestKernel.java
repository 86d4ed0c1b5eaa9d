package dev.kpemu.kprobes.events;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.TreeMap;

import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.kprobes.TestGuests;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.X86Reg;

/**
 * A bare-metal kprobes test guest dressed up as a kernel for the event engine: kallsyms over its
 * functions plus a data symbol, a fake current task (x86-64: a per-CPU pointer at GS_BASE + 0x40;
 * arm64: SP_EL0) with a hand-written task_struct layout, and user pages.
 *
 * <p>User memory: {@link #USER} (read/write for EL0 / user), {@link #USER_NOEL0} (arm64: mapped
 * for the kernel only; x86-64: an ordinary identity-mapped page), {@link #USER_UNMAPPED}.
 */
final class GuestKernel implements AutoCloseable {
    /** The fake task_struct layout (offsets written by hand). */
    static final long COMM_OFF = 0x20, PID_OFF = 0x10, TGID_OFF = 0x14, GS_OFF = 0x40;
    static final int PID = 42, TGID = 41;
    static final String COMM = "kpemu-test";
    static final long USER = 0x60_0000L, USER_NOEL0 = 0x80_0000L, USER_UNMAPPED = 0x200_0000L;

    final Arch arch;
    final TestGuests.Handle guest;
    final Machine machine;
    final Kprobes kprobes;
    final Symbols symbols;
    final TaskLayout layout;
    final ByteArrayOutputStream output = new ByteArrayOutputStream();
    final List<TraceRecord> records = new ArrayList<>();
    final EventEngine engine;
    /** Free kernel memory for test data (inside the guest's data page). */
    final long data;
    final long task;

    GuestKernel(Arch arch) {
        this(arch, Dialect.LINUX_6_1);
    }

    GuestKernel(Arch arch, Dialect dialect) {
        this.arch = arch;
        this.guest = TestGuests.create(arch);
        this.machine = guest.machine();
        this.kprobes = guest.kprobes();
        this.data = guest.dataVa() + 0x1000;
        this.symbols = new Symbols();
        guest.functions().forEach((n, a) -> symbols.add(n, a, TestGuests.Handle.FUNCTION_SIZE));
        symbols.add("test_data", data, 0x100);
        this.task = guest.dataVa() + 0x4000;
        if (arch == Arch.X86_64) {
            long gsBase = guest.dataVa() + 0x3000;
            machine.engine().regWrite(X86Reg.GS_BASE, gsBase);
            machine.writeVirtualLong(gsBase + GS_OFF, task);
            layout = TaskLayout.x86(GS_OFF, COMM_OFF, PID_OFF, TGID_OFF);
        } else {
            machine.engine().regWrite(Arm64Reg.SP_EL0, task);
            layout = TaskLayout.arm64(COMM_OFF, PID_OFF, TGID_OFF);
        }
        machine.writeVirtual(task + COMM_OFF, (COMM + "\0").getBytes(StandardCharsets.US_ASCII));
        writeInt(task + PID_OFF, PID);
        writeInt(task + TGID_OFF, TGID);
        mapUser();
        this.engine = EventEngine.attach(kprobes, symbols, layout, new PrintStream(output, true, StandardCharsets.UTF_8))
                .dialect(dialect)
                .addListener(recordsListener);
    }

    /** The listener that fills {@link #records}. */
    final java.util.function.Consumer<TraceRecord> recordsListener = records::add;

    private void mapUser() {
        if (arch == Arch.X86_64) return; // the low 16 MiB are identity-mapped (no U bit: x86 does not check it)
        long ram = Arm64Layout.RAM_BASE;
        long root0 = ram + 0x40_0000, l1 = ram + 0x50_0000, l2 = ram + 0x50_1000;
        var mem = machine.memory();
        mem.write(l1, new byte[0x2000]);
        mem.writeLong(root0, l1 | 3);
        mem.writeLong(l1, l2 | 3);
        long attrs = (1L << 10) | (3L << 8) | 1;                           // AF, inner shareable, block
        mem.writeLong(l2 + 8 * (USER >>> 21), (ram + USER) | attrs | (1L << 6));   // AP=01: EL0 read/write
        mem.writeLong(l2 + 8 * (USER_NOEL0 >>> 21), (ram + USER_NOEL0) | attrs);   // AP=00: EL1 only
        machine.engine().flushTlb();
    }

    /** Writes bytes at a user virtual address (through the kernel alias of the same RAM). */
    void writeUser(long va, byte[] b) {
        long pa = arch == Arch.X86_64 ? va : Arm64Layout.RAM_BASE + va;
        machine.memory().write(pa, b);
    }

    void writeUserString(long va, String s) { writeUser(va, (s + "\0").getBytes(StandardCharsets.UTF_8)); }

    void writeString(long va, String s) { machine.writeVirtual(va, (s + "\0").getBytes(StandardCharsets.UTF_8)); }

    void writeLong(long va, long v) { machine.writeVirtualLong(va, v); }

    void writeInt(long va, int v) {
        machine.writeVirtual(va, new byte[] {(byte) v, (byte) (v >>> 8), (byte) (v >>> 16), (byte) (v >>> 24)});
    }

    long sym(String name) { return guest.sym(name); }

    long call(String fn, long... args) { return guest.call(fn, args); }

    /** {@code %REG} of the n-th argument register. */
    String reg(int n) {
        if (arch == Arch.ARM64) return "%x" + n;
        return "%" + new String[] {"di", "si", "dx", "cx", "r8", "r9"}[n];
    }

    /** Replaces R0..R5 in a script by this arch's argument registers. */
    String script(String s) {
        for (int i = 5; i >= 0; i--) s = s.replace("R" + i, reg(i));
        return s;
    }

    void write(String defs) throws ProbeSyntaxException { engine.write(script(defs)); }

    /** The event bodies recorded so far (after the context columns), and forgets them. */
    List<String> bodies() {
        List<String> l = records.stream().map(TraceRecord::body).toList();
        records.clear();
        return l;
    }

    /** The printed lines so far. */
    List<String> lines() { return output.toString(StandardCharsets.UTF_8).lines().toList(); }

    void setInterruptsMasked(boolean masked) {
        if (arch == Arch.X86_64) {
            long f = machine.engine().regRead(X86Reg.RFLAGS);
            machine.engine().regWrite(X86Reg.RFLAGS, masked ? f & ~0x200L : f | 0x200L);
        } else {
            long p = machine.engine().regRead(Arm64Reg.PSTATE);
            machine.engine().regWrite(Arm64Reg.PSTATE, masked ? p | 0x80 : p & ~0x80L);
        }
    }

    @Override public void close() {
        engine.close();
        guest.close();
    }

    /** kallsyms of the test guest. */
    static final class Symbols implements KernelSymbols {
        private final TreeMap<Long, Symbol> byAddr = new TreeMap<>(Long::compareUnsigned);
        private final Map<String, List<Symbol>> byName = new HashMap<>();

        void add(String name, long start, long size) {
            Symbol s = new Symbol(name, start, size, null);
            byAddr.put(start, s);
            byName.computeIfAbsent(name, k -> new ArrayList<>()).add(s);
        }

        @Override public int countSymbols(String name) { return byName.getOrDefault(name, List.of()).size(); }

        @Override public FuncEntry funcEntry(String symbol, long offset) {
            if (!byName.containsKey(symbol)) return FuncEntry.NOT_FOUND;
            return offset == 0 ? FuncEntry.ENTRY : FuncEntry.NOT_ENTRY;
        }

        @Override public OptionalLong lookupName(String name) {
            List<Symbol> l = byName.get(name);
            return l == null ? OptionalLong.empty() : OptionalLong.of(l.getFirst().start());
        }

        @Override public Optional<Symbol> symbolAt(long address) {
            var e = byAddr.floorEntry(address);
            if (e == null || Long.compareUnsigned(address - e.getKey(), e.getValue().size()) >= 0) return Optional.empty();
            return Optional.of(e.getValue());
        }
    }
}
