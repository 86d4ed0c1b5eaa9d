package dev.kpemu.kprobes.events;

import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.TreeMap;

/** A tiny kernel for tests: a symbol table, registers and sparse memory. */
final class FakeKernel implements KernelSymbols, FetchContext {
    static final long KBASE = 0xffffffff81000000L;
    static final long USER_TOP = 0x0000800000000000L;

    private final TreeMap<Long, Symbol> byAddr = new TreeMap<>();
    private final Map<String, Integer> counts = new HashMap<>();
    private final Map<String, Long> addrs = new HashMap<>();
    final long[] regs = new long[34];
    final Map<Long, Byte> mem = new HashMap<>();
    long sp;
    byte[] comm = "cat".getBytes();

    FakeKernel() {
        sym("vfs_read", KBASE + 0x1000, 0x120, null);
        sym("do_sys_openat2", KBASE + 0x2000, 0x1a0, null);
        sym("do_sys_open", KBASE + 0x2200, 0xd6, null);
        sym("_sdata", KBASE + 0x100000, 0, null);
        sym("jiffies", KBASE + 0x200000, 8, null);
        sym("trace_printk_irq_work", KBASE + 0x3000, 0x40, "trace_printk");
        sym("dup_sym", KBASE + 0x4000, 0x10, null);
        sym("dup_sym", KBASE + 0x5000, 0x10, null);
        sym("foo.isra.0", KBASE + 0x6000, 0x30, null);
    }

    void sym(String name, long addr, long size, String mod) {
        byAddr.put(addr, new Symbol(name, addr, size, mod));
        counts.merge(name, 1, Integer::sum);
        addrs.putIfAbsent(name, addr);
    }

    /** Replaces every symbol called {@code name} by one at {@code addr}. */
    void replace(String name, long addr, long size) {
        byAddr.values().removeIf(s -> s.name().equals(name));
        counts.remove(name);
        addrs.remove(name);
        sym(name, addr, size, null);
    }

    void put(long addr, byte[] b) {
        for (int i = 0; i < b.length; i++) mem.put(addr + i, b[i]);
    }

    void putLong(long addr, long v) {
        for (int i = 0; i < 8; i++) mem.put(addr + i, (byte) (v >>> (8 * i)));
    }

    void putString(long addr, String s) {
        put(addr, (s + "\0").getBytes());
    }

    // KernelSymbols
    @Override public int countSymbols(String name) { return counts.getOrDefault(name, 0); }

    @Override public FuncEntry funcEntry(String symbol, long offset) {
        String s = symbol.contains(":") ? symbol.substring(symbol.indexOf(':') + 1) : symbol;
        if (!counts.containsKey(s)) return FuncEntry.NOT_FOUND;
        return offset == 0 ? FuncEntry.ENTRY : FuncEntry.NOT_ENTRY;
    }

    @Override public OptionalLong lookupName(String name) {
        Long a = addrs.get(name);
        return a == null ? OptionalLong.empty() : OptionalLong.of(a);
    }

    @Override public Optional<Symbol> symbolAt(long address) {
        var e = byAddr.floorEntry(address);
        if (e == null) return Optional.empty();
        Symbol s = e.getValue();
        if (address >= s.start() + Math.max(1, s.size())) return Optional.empty();
        return Optional.of(s);
    }

    // FetchContext
    @Override public long register(int slot) { return regs[slot]; }

    @Override public long stackPointer() { return sp; }

    private boolean read(long address, byte[] dst, int offset, int len) {
        for (int i = 0; i < len; i++) if (!mem.containsKey(address + i)) return false;
        for (int i = 0; i < len; i++) dst[offset + i] = mem.get(address + i);
        return true;
    }

    @Override public boolean readKernel(long address, byte[] dst, int offset, int len) {
        if (Long.compareUnsigned(address, USER_TOP) < 0) return false;
        return read(address, dst, offset, len);
    }

    @Override public boolean readUser(long address, byte[] dst, int offset, int len) {
        if (Long.compareUnsigned(address, USER_TOP) >= 0) return false;
        return read(address, dst, offset, len);
    }

    @Override public byte[] comm() { return comm; }

    @Override public KernelSymbols symbols() { return this; }
}
