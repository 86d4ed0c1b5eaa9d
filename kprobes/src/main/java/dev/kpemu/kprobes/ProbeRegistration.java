package dev.kpemu.kprobes;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Registration ({@code register_kprobe}, {@code register_kretprobe} and their inverses), with the
 * kernel's checks and errno values ({@code check_kprobe_address_safe}, the blacklist, the
 * {@link AddressRules}), aggregation of probes on one address, enabling, disabling and
 * {@code kill_kprobe}.
 */
final class ProbeRegistration {
    private final SymbolResolver symbols;
    private final SlotArea slots;
    private final ArchKprobes arch;
    private final Map<Long, ProbePoint> points;
    private final ProbeTable table;
    private final ProbeArming arming;
    private final ReturnProbes returns;
    private final OptimizerBridge optimizers;
    private final Blacklist blacklist = new Blacklist();
    private boolean allowUnsafe;
    private AddressRules rules = AddressRules.none();

    ProbeRegistration(SymbolResolver symbols, SlotArea slots, ArchKprobes arch, ProbeTable table, ProbeArming arming,
                      ReturnProbes returns, OptimizerBridge optimizers) {
        this.symbols = symbols;
        this.slots = slots;
        this.arch = arch;
        this.points = table.points;
        this.table = table;
        this.arming = arming;
        this.returns = returns;
        this.optimizers = optimizers;
        blacklist.add(slots.virtualBase(), slots.virtualBase() + slots.slotBytes(), "kprobe_insn_slots");
    }

    Blacklist blacklist() { return blacklist; }

    void allowUnsafe(boolean allow) { this.allowUnsafe = allow; }

    boolean allowsUnsafe() { return allowUnsafe; }

    void rules(AddressRules rules) { this.rules = rules; }

    // ------------------------------------------------------------------ kprobes

    /** {@code register_kprobe}. Throws {@link KprobeException} with the kernel's errno. */
    void register(Kprobe p) {
        arming.syncText();
        if (p.isRegistered()) throw new KprobeException(Errno.EINVAL, p + " is already registered");
        long requested = canonicalAddress(p);
        if (slots.contains(requested)) throw new KprobeException(Errno.EINVAL, "kprobe slot memory cannot be probed");
        SymbolResolver.SymbolInfo sym = symbolOf(requested);
        ProbeDecoder.ProbeAddress where = arch.adjustAddress(sym.start(), requested - sym.start(), arming::originalText);
        long addr = where.address();
        int siteFlags = checkAddressSafe(addr, sym);
        p.flags &= Kprobe.FLAG_DISABLED;
        p.flags |= siteFlags;
        if (where.onFunctionEntry()) p.flags |= Kprobe.FLAG_ON_FUNC_ENTRY;
        p.nmissed = 0;
        ProbePoint point = points.get(addr);
        if (point == null) {
            refuseExceptionInstruction(addr, sym, arming::originalText);
            point = arming.preparePoint(addr, sym);
            point.ftrace = (siteFlags & Kprobe.FLAG_FTRACE) != 0;
            points.put(addr, point);
            table.atAddress.put(addr, point);
            table.byAddress.put(addr, point);
            table.formerProbeAddresses.add(addr);
            if (point.slot != 0) table.stepTraps.put(point.stepTrap(arch), point);
            arming.watch(point);
        }
        if (p.afterOlder) point.children.addLast(p);
        else point.children.addFirst(p);
        p.point = point;
        p.setAddress(addr);
        arming.refreshSlot(point);
        arming.updateArming(point);
        optimizers.optimizerChanged(addr);
    }

    /** {@code register_kprobes}: all or nothing; on the first failure the earlier ones are unregistered. */
    void registerAll(List<Kprobe> probes) {
        if (probes.isEmpty()) throw new KprobeException(Errno.EINVAL, "no probes");
        List<Kprobe> done = new ArrayList<>();
        try {
            for (Kprobe p : probes) {
                register(p);
                done.add(p);
            }
        } catch (KprobeException e) {
            for (Kprobe p : done) unregister(p);
            throw e;
        }
    }

    /** {@code unregister_kprobe}: never fails; a probe that is not registered gets address 0 if it was given by symbol. */
    void unregister(Kprobe p) {
        ProbePoint point = p.point;
        if (point == null) {
            if (p.symbolName() != null) p.setAddress(0);
            return;
        }
        point.children.remove(p);
        p.point = null;
        if (p.symbolName() != null) p.setAddress(0); // so the same Kprobe can be registered again by symbol
        if (point.children.isEmpty()) {
            arming.removePoint(point);
        } else {
            arming.refreshSlot(point);
            arming.updateArming(point);
            optimizers.optimizerChanged(point.address);
        }
    }

    // ------------------------------------------------------------------ kretprobes

    /** {@code register_kretprobe}. */
    void register(Kretprobe rp) {
        Kprobe kp = rp.kp;
        if (kp.isRegistered()) throw new KprobeException(Errno.EINVAL, rp + " is already registered");
        long addr = canonicalAddress(kp);
        SymbolResolver.SymbolInfo sym = symbolOf(addr);
        if (!arch.adjustAddress(sym.start(), addr - sym.start(), arming::originalText).onFunctionEntry()) {
            throw new KprobeException(Errno.EINVAL, "kretprobe not at a function entry: " + sym.name() + "+0x" + Long.toHexString(addr - sym.start()));
        }
        returns.createPool(rp);
        try {
            register(kp);
        } catch (KprobeException e) {
            returns.dropPool(rp);
            throw e;
        }
        rp.nmissed = 0;
    }

    void registerAllKretprobes(List<Kretprobe> rps) {
        if (rps.isEmpty()) throw new KprobeException(Errno.EINVAL, "no probes");
        List<Kretprobe> done = new ArrayList<>();
        try {
            for (Kretprobe rp : rps) {
                register(rp);
                done.add(rp);
            }
        } catch (KprobeException e) {
            for (Kretprobe rp : done) unregister(rp);
            throw e;
        }
    }

    /** {@code unregister_kretprobe}: outstanding instances still return correctly but run no handler. */
    void unregister(Kretprobe rp) {
        unregister(rp.kp);
        returns.dropPool(rp);
    }

    // ------------------------------------------------------------------ state

    /** {@code disable_kprobe}. */
    void disable(Kprobe p) {
        if (p.point == null) throw new KprobeException(Errno.EINVAL, p + " is not registered");
        p.flags |= Kprobe.FLAG_DISABLED;
        arming.updateArming(p.point);
        optimizers.optimizerChanged(p.point.address);
    }

    /** {@code kprobe_free_init_mem} / {@code kill_kprobe} (see {@link Kprobes#killRange}). */
    void killRange(long start, long end) {
        for (ProbePoint p : points.values()) {
            if (Long.compareUnsigned(p.address, start) < 0 || Long.compareUnsigned(p.address, end) >= 0) continue;
            p.gone = true;
            for (Kprobe k : p.children) k.flags |= Kprobe.FLAG_GONE;
            arming.updateArming(p);
            arming.unwatch(p);
            optimizers.optimizerChanged(p.address);
        }
    }

    /** {@code enable_kprobe}. */
    void enable(Kprobe p) {
        if (p.point == null) throw new KprobeException(Errno.EINVAL, p + " is not registered");
        if (p.isGone()) throw new KprobeException(Errno.EINVAL, p + " is gone");
        p.flags &= ~Kprobe.FLAG_DISABLED;
        arming.updateArming(p.point);
        optimizers.optimizerChanged(p.point.address);
    }

    /** Unregisters every probe (restoring the original bytes). */
    void removeAll() {
        for (ProbePoint p : new ArrayList<>(points.values())) {
            for (Kprobe k : new ArrayList<>(p.children)) k.point = null;
            arming.removePoint(p);
        }
    }

    // ------------------------------------------------------------------ checks

    private long canonicalAddress(Kprobe p) {
        boolean hasSym = p.symbolName() != null;
        boolean hasAddr = p.address() != 0 && !p.isRegistered();
        if (hasSym && p.address() != 0) throw new KprobeException(Errno.EINVAL, "both symbol_name and addr given");
        if (!hasSym && !hasAddr) throw new KprobeException(Errno.EINVAL, "neither symbol_name nor addr given");
        long addr;
        if (hasSym) {
            var a = symbols.address(p.symbolName());
            if (a.isEmpty()) throw new KprobeException(Errno.ENOENT, "unknown symbol " + p.symbolName());
            addr = a.getAsLong() + p.offset();
        } else {
            addr = p.address() + p.offset();
        }
        return addr;
    }

    /** kallsyms_lookup_size_offset: the symbol an address lies in, or ENOENT. */
    private SymbolResolver.SymbolInfo symbolOf(long addr) {
        return symbols.lookup(addr).orElseThrow(() -> new KprobeException(Errno.ENOENT, String.format("0x%x is in no symbol", addr)));
    }

    /** {@code can_probe}'s {@code is_exception_insn} (Linux 6.4+, {@link AddressRules#refusesExceptionInstructions}): EILSEQ. */
    void refuseExceptionInstruction(long addr, SymbolResolver.SymbolInfo sym, ProbeDecoder.TextReader text) {
        // a bad boundary is EILSEQ too, so which of the two is found first does not show
        if (rules.refusesExceptionInstructions() && arch.isExceptionInstruction(addr, text))
            throw new KprobeException(Errno.EILSEQ, String.format("0x%x raises an exception by design (INT or UD)", addr));
    }

    /** {@code check_kprobe_address_safe} and {@code check_ftrace_location}: the flags the probe gets, or EINVAL. */
    private int checkAddressSafe(long addr, SymbolResolver.SymbolInfo sym) {
        if (!sym.text()) throw new KprobeException(Errno.EINVAL, sym.name() + " is not text");
        if (allowUnsafe) return 0;
        Blacklist.Range r = blacklist.find(addr);
        if (r != null) throw new KprobeException(Errno.EINVAL, String.format("0x%x is blacklisted (%s)", addr, r.name()));
        return rules.check(addr, sym);
    }
}
