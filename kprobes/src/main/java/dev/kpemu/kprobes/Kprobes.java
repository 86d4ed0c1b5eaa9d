package dev.kpemu.kprobes;

import java.lang.System.Logger.Level;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import dev.kpemu.kprobes.arm64.Arm64Kprobes;
import dev.kpemu.kprobes.x86.X86Kprobes;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.TrapHandler;
import dev.kpemu.unicorn.Unicorn;

/**
 * The kprobes engine bound to one machine ({@code kernel/kprobes.c}): registration with the
 * kernel's checks and errno values, aggregation, arming through breakpoints written into guest
 * text, the hit path (pre handler, out-of-line step or simulation, post handler), reentry,
 * kretprobes with a trampoline in slot memory, the global arm switch and {@code kprobes/list}.
 *
 * <p>It installs itself as the machine's {@link TrapHandler}: breakpoints that are not its own
 * go on to the guest. Everything runs on the emulating thread (handlers run inside Unicorn's
 * interrupt hook); registration from handlers is allowed.
 */
public final class Kprobes implements TrapHandler, AutoCloseable {
    private static final System.Logger LOG = System.getLogger("dev.kpemu.kprobes");
    /** {@code KPROBE_HASH_BITS}: kprobes/list is ordered by this hash, as the kernel's is. */
    private static final int HASH_BITS = 6;
    /** Default {@code maxactive}: max(10, 2 × NR_CPUS) with one vCPU. */
    public static final int DEFAULT_MAXACTIVE = 10;

    /** The kernel's per-CPU kprobe status values. */
    enum Status { HIT_ACTIVE, HIT_SS, REENTER, HIT_SSDONE }

    /** One level of {@code current_kprobe} (the kernel keeps current + one saved previous). */
    private static final class Activation {
        final ProbePoint point;
        Status status;

        Activation(ProbePoint point, Status status) {
            this.point = point;
            this.status = status;
        }
    }

    private final Machine machine;
    private final ArchKprobes arch;
    private final Regs regs;
    private final SymbolResolver symbols;
    private final SlotArea slots;
    private final Blacklist blacklist = new Blacklist();
    private final Map<Long, ProbePoint> points = new LinkedHashMap<>();
    /** The same points by address (unsigned order), for the text around an address. */
    private final java.util.NavigableMap<Long, ProbePoint> byAddress = new java.util.TreeMap<>(Long::compareUnsigned);
    private final Map<Long, ProbePoint> stepTraps = new HashMap<>();
    private final Set<Long> formerProbeAddresses = new HashSet<>();
    private final ArrayDeque<Activation> active = new ArrayDeque<>();
    private final Map<Kretprobe, ArrayDeque<KretprobeInstance>> pools = new IdentityHashMap<>();
    private final List<KretprobeInstance> outstanding = new ArrayList<>();
    /** The guest's {@code current} task, for kretprobe instances (0: unknown). */
    private java.util.function.LongSupplier currentTask = () -> 0;
    private final Set<ProbePoint> textChanged = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Set<Kprobe> failedOnce = Collections.newSetFromMap(new IdentityHashMap<>());
    private final TextWatch textWatch;
    private long trampoline;
    /** The kernel's own trampoline text while the trampoline lives there ({@link #kretprobeTrampolineAt}), else null. */
    private byte[] kernelTrampolineText;
    /**
     * Kernels whose kretprobes run on rethook (x86 since 5.19, every arch later) hand each
     * instance the return address its entry saw; the older kretprobe code (arm64 6.1) corrects
     * every instance of a frame to the real one first.
     */
    private boolean rethook;
    private final long callStop;
    private boolean watchText = true;
    private boolean allArmed = true;
    private boolean allowUnsafe;
    private AddressRules rules = AddressRules.none();
    private boolean boosting = true;
    private long sequence;
    private long handlerFailures;
    private Throwable lastHandlerFailure;
    /** Jump optimization, or null (every probe a breakpoint probe). */
    private ProbeOptimizer optimizer;
    /** {@code debug.kprobes_optimization}. */
    private boolean optimizationAllowed = true;
    private final OptimizedRegs optimizedRegs;
    private final FtraceRegs ftraceRegs;

    private Kprobes(Machine machine, ArchKprobes arch, SymbolResolver symbols, SlotArea slots) {
        this.machine = machine;
        this.arch = arch;
        this.regs = arch.regs();
        this.symbols = symbols;
        this.slots = slots;
        this.textWatch = new TextWatch(machine, this::onTextWrite);
        this.optimizedRegs = new OptimizedRegs(regs);
        this.ftraceRegs = new FtraceRegs(regs);
        this.trampoline = slots.allocate();
        this.callStop = slots.allocate();
        slots.write(machine, trampoline, arch.trampolineCode());
        blacklist.add(slots.virtualBase(), slots.virtualBase() + slots.slotBytes(), "kprobe_insn_slots");
    }

    /** An engine for {@code machine}'s arch, installed as its trap handler. */
    public static Kprobes attach(Machine machine, SymbolResolver symbols, SlotArea slots) {
        ArchKprobes arch = switch (machine.arch()) {
            case X86_64 -> new X86Kprobes(machine);
            case ARM64 -> new Arm64Kprobes(machine);
        };
        Kprobes k = new Kprobes(machine, arch, symbols, slots);
        machine.setTrapHandler(k);
        return k;
    }

    public Machine machine() { return machine; }

    public Regs regs() { return regs; }

    public Blacklist blacklist() { return blacklist; }

    /**
     * Allows probes the kernel refuses: blacklisted ranges and every {@link AddressRules} refusal
     * (off by default, as in the kernel). kpemu's handlers run on the host, so such probes cannot
     * recurse into kprobes; this is kpemu's extension.
     */
    public Kprobes allowUnsafe(boolean allow) {
        this.allowUnsafe = allow;
        return this;
    }

    public boolean allowsUnsafe() { return allowUnsafe; }

    /** The kernel's address rules every registration checks (default: none). */
    public Kprobes rules(AddressRules rules) {
        this.rules = rules;
        return this;
    }

    /**
     * Keeps saved original bytes in step with guest writes to probed text (on by default; a native
     * check before blocks that contain probed text, see {@link TextWatch}).
     */
    public Kprobes watchText(boolean watch) {
        if (watch == watchText) return this;
        this.watchText = watch;
        for (ProbePoint p : points.values()) {
            if (watch) textWatch.watch(p, p.insn.length()); else textWatch.unwatch(p);
        }
        return this;
    }

    /**
     * Boosting on or off (on by default). Linux boosts only on non-preemptible kernels
     * ({@code !CONFIG_PREEMPTION}); turning it off makes every copy end with a trap.
     */
    public Kprobes boosting(boolean on) {
        this.boosting = on;
        for (ProbePoint p : points.values()) refreshSlot(p);
        return this;
    }

    /**
     * Attaches jump optimization (module {@code optprobes}): {@code factory} gets the engine's
     * {@link ProbeOptimizer.Engine} view. Probes already registered are offered to it.
     */
    public <T extends ProbeOptimizer> T attachOptimizer(java.util.function.Function<ProbeOptimizer.Engine, T> factory) {
        if (optimizer != null) throw new IllegalStateException("an optimizer is already attached");
        T o = factory.apply(new OptimizerView());
        optimizer = o;
        for (Long a : List.copyOf(points.keySet())) o.probeChanged(a);
        return o;
    }

    /** The attached optimizer, or null. */
    public ProbeOptimizer optimizer() { return optimizer; }

    /**
     * {@code debug.kprobes_optimization} (1 by default, as Linux at boot): 0 unoptimizes every
     * probe (each becomes a breakpoint probe), 1 lets the optimizer optimize them again.
     */
    public Kprobes optimization(boolean allow) {
        if (allow == optimizationAllowed) return this;
        optimizationAllowed = allow;
        LOG.log(Level.INFO, allow ? "kprobe jump-optimization is enabled. All kprobes are optimized if possible."
                : "kprobe jump-optimization is disabled. All kprobes are based on software breakpoint.");
        for (Long a : List.copyOf(points.keySet())) optimizerChanged(a);
        return this;
    }

    /** Reads {@code debug.kprobes_optimization}. */
    public boolean optimization() { return optimizationAllowed; }

    /** True when {@code kprobes/list} shows the probe at {@code address} as {@code [OPTIMIZED]}. */
    public boolean isOptimized(long address) {
        return optimizer != null && points.containsKey(address) && optimizer.listedOptimized(address);
    }

    private void optimizerChanged(long address) {
        if (optimizer != null) optimizer.probeChanged(address);
    }

    /** The address of the kretprobe trampoline (slot memory, or the kernel's own: {@link #kretprobeTrampolineAt}). */
    public long trampolineAddress() { return trampoline; }

    /**
     * Puts the kretprobe trampoline at {@code va}, the kernel's own trampoline function
     * ({@code arch_rethook_trampoline}, arm64 6.1's {@code __kretprobe_trampoline}), so that the
     * return addresses a probed function's frame holds are the kernel's: {@code $stack0:symbol}
     * prints {@code arch_rethook_trampoline+0x0/...} and a return site seen through another
     * kretprobe is recognised as the kernel recognises it; {@code rethook} says which of the kernel's
     * two return-probe implementations to follow. The kernel runs no kprobes of its own,
     * so that text is never executed otherwise; its bytes are restored by {@link #close()}. Call it
     * before registering kretprobes.
     */
    public Kprobes kretprobeTrampolineAt(long va, boolean rethook) {
        this.rethook = rethook;
        if (!pools.isEmpty()) throw new IllegalStateException("kretprobes are registered: the trampoline cannot move");
        byte[] code = arch.trampolineCode();
        byte[] saved = machine.readVirtual(va, code.length);
        machine.writeVirtual(va, code);
        machine.invalidateCode(va, code.length);
        if (kernelTrampolineText == null) slots.free(trampoline);
        else restoreKernelTrampoline();
        kernelTrampolineText = saved;
        trampoline = va;
        return this;
    }

    private void restoreKernelTrampoline() {
        machine.writeVirtual(trampoline, kernelTrampolineText);
        machine.invalidateCode(trampoline, kernelTrampolineText.length);
        kernelTrampolineText = null;
    }

    /** Java exceptions thrown by handlers so far (each was caught; the guest went on). */
    public long handlerFailures() { return handlerFailures; }

    public Throwable lastHandlerFailure() { return lastHandlerFailure; }

    // ------------------------------------------------------------------ registration

    /** {@code register_kprobe}. Throws {@link KprobeException} with the kernel's errno. */
    public void register(Kprobe p) {
        syncText();
        if (p.isRegistered()) throw new KprobeException(Errno.EINVAL, p + " is already registered");
        long requested = canonicalAddress(p);
        if (slots.contains(requested)) throw new KprobeException(Errno.EINVAL, "kprobe slot memory cannot be probed");
        SymbolResolver.SymbolInfo sym = symbolOf(requested);
        ProbeDecoder.ProbeAddress where = arch.adjustAddress(sym.start(), requested - sym.start(), this::originalText);
        long addr = where.address();
        int siteFlags = checkAddressSafe(addr, sym);
        p.flags &= Kprobe.FLAG_DISABLED;
        p.flags |= siteFlags;
        if (where.onFunctionEntry()) p.flags |= Kprobe.FLAG_ON_FUNC_ENTRY;
        p.nmissed = 0;
        ProbePoint point = points.get(addr);
        if (point == null) {
            point = preparePoint(addr, sym);
            point.ftrace = (siteFlags & Kprobe.FLAG_FTRACE) != 0;
            points.put(addr, point);
            byAddress.put(addr, point);
            formerProbeAddresses.add(addr);
            if (point.slot != 0) stepTraps.put(point.stepTrap(arch), point);
            if (watchText) textWatch.watch(point, point.insn.length());
        }
        if (p.afterOlder) point.children.addLast(p);
        else point.children.addFirst(p);
        p.point = point;
        p.setAddress(addr);
        refreshSlot(point);
        updateArming(point);
        optimizerChanged(addr);
    }

    /** {@code register_kprobes}: all or nothing; on the first failure the earlier ones are unregistered. */
    public void registerAll(List<Kprobe> probes) {
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
    public void unregister(Kprobe p) {
        ProbePoint point = p.point;
        if (point == null) {
            if (p.symbolName() != null) p.setAddress(0);
            return;
        }
        point.children.remove(p);
        p.point = null;
        if (p.symbolName() != null) p.setAddress(0); // so the same Kprobe can be registered again by symbol
        if (point.children.isEmpty()) {
            removePoint(point);
        } else {
            refreshSlot(point);
            updateArming(point);
            optimizerChanged(point.address);
        }
    }

    public void unregisterAll(List<Kprobe> probes) {
        for (Kprobe p : probes) unregister(p);
    }

    /** {@code register_kretprobe}. */
    public void register(Kretprobe rp) {
        Kprobe kp = rp.kp;
        if (kp.isRegistered()) throw new KprobeException(Errno.EINVAL, rp + " is already registered");
        long addr = canonicalAddress(kp);
        SymbolResolver.SymbolInfo sym = symbolOf(addr);
        if (!arch.adjustAddress(sym.start(), addr - sym.start(), this::originalText).onFunctionEntry()) {
            throw new KprobeException(Errno.EINVAL, "kretprobe not at a function entry: " + sym.name() + "+0x" + Long.toHexString(addr - sym.start()));
        }
        if (rp.dataSize() > Kretprobe.MAX_DATA_SIZE) throw new KprobeException(Errno.E2BIG, "data size " + rp.dataSize() + " > " + Kretprobe.MAX_DATA_SIZE);
        if (rp.maxactive() <= 0) rp.setMaxactive(DEFAULT_MAXACTIVE);
        ArrayDeque<KretprobeInstance> pool = new ArrayDeque<>(rp.maxactive());
        for (int i = 0; i < rp.maxactive(); i++) pool.push(new KretprobeInstance(rp));
        pools.put(rp, pool);
        try {
            register(kp);
        } catch (KprobeException e) {
            pools.remove(rp);
            throw e;
        }
        rp.nmissed = 0;
    }

    public void registerAllKretprobes(List<Kretprobe> rps) {
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
    public void unregister(Kretprobe rp) {
        unregister(rp.kp);
        pools.remove(rp);
        for (KretprobeInstance ri : outstanding) if (ri.rp == rp) ri.rp = null;
    }

    public void unregisterAllKretprobes(List<Kretprobe> rps) {
        for (Kretprobe rp : rps) unregister(rp);
    }

    /** {@code disable_kprobe}. */
    public void disable(Kprobe p) {
        if (p.point == null) throw new KprobeException(Errno.EINVAL, p + " is not registered");
        p.flags |= Kprobe.FLAG_DISABLED;
        updateArming(p.point);
        optimizerChanged(p.point.address);
    }

    /**
     * {@code kprobe_free_init_mem}: the kernel is about to free [start, end) (its init memory);
     * every probe there is killed ({@code kill_kprobe}): its original text is put back now, before
     * the memory is reused, it never fires again and {@link #list()} shows it {@code [GONE]}.
     */
    public void killRange(long start, long end) {
        for (ProbePoint p : points.values()) {
            if (Long.compareUnsigned(p.address, start) < 0 || Long.compareUnsigned(p.address, end) >= 0) continue;
            p.gone = true;
            for (Kprobe k : p.children) k.flags |= Kprobe.FLAG_GONE;
            updateArming(p);
            if (watchText) textWatch.unwatch(p);
            optimizerChanged(p.address);
        }
    }

    /** {@code enable_kprobe}. */
    public void enable(Kprobe p) {
        if (p.point == null) throw new KprobeException(Errno.EINVAL, p + " is not registered");
        if (p.isGone()) throw new KprobeException(Errno.EINVAL, p + " is gone");
        p.flags &= ~Kprobe.FLAG_DISABLED;
        updateArming(p.point);
        optimizerChanged(p.point.address);
    }

    public void disable(Kretprobe rp) { disable(rp.kp); }

    public void enable(Kretprobe rp) { enable(rp.kp); }

    /** debugfs {@code kprobes/enabled} = 1: arms every registered, enabled probe (their own disabled state is kept). */
    public void armAll() {
        syncText();
        allArmed = true;
        for (ProbePoint p : points.values()) updateArming(p);
        for (Long a : List.copyOf(points.keySet())) optimizerChanged(a);
    }

    /** debugfs {@code kprobes/enabled} = 0: disarms everything, keeping each probe's own disabled state. */
    public void disarmAll() {
        allArmed = false;
        for (ProbePoint p : points.values()) updateArming(p);
        for (Long a : List.copyOf(points.keySet())) optimizerChanged(a);
    }

    /** Reads debugfs {@code kprobes/enabled}. */
    public boolean allArmed() { return allArmed; }

    // ------------------------------------------------------------------ preparation and arming

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

    /** {@code check_kprobe_address_safe} and {@code check_ftrace_location}: the flags the probe gets, or EINVAL. */
    private int checkAddressSafe(long addr, SymbolResolver.SymbolInfo sym) {
        if (!sym.text()) throw new KprobeException(Errno.EINVAL, sym.name() + " is not text");
        if (allowUnsafe) return 0;
        Blacklist.Range r = blacklist.find(addr);
        if (r != null) throw new KprobeException(Errno.EINVAL, String.format("0x%x is blacklisted (%s)", addr, r.name()));
        return rules.check(addr, sym);
    }

    private ProbePoint preparePoint(long addr, SymbolResolver.SymbolInfo sym) {
        long physical;
        try {
            physical = machine.translateOrThrow(addr).physical();
        } catch (Machine.GuestMemoryException e) {
            throw new KprobeException(Errno.EINVAL, String.format("0x%x is not mapped", addr));
        }
        ArchInsn insn = arch.prepare(addr, this::originalText, sym);
        ProbePoint p = new ProbePoint(addr, sym, physical, sequence++);
        p.listedOptimized = () -> isOptimized(addr);
        p.insn = insn;
        p.saved = originalText(addr, arch.breakpoint().length);
        if (insn.outOfLine()) {
            ensureSlotsMapped();
            p.slot = slots.allocate();
            try {
                slots.write(machine, p.slot, arch.slotCode(insn, addr, p.slot, false));
            } catch (KprobeException e) {
                slots.free(p.slot);
                throw e;
            }
        }
        return p;
    }

    private void ensureSlotsMapped() {
        if (slots.mappedIn(machine)) return;
        slots.map(machine, arch);
    }

    /** Boosting: a slot ending in a jump back when the instruction allows it and no child has a post handler. */
    private void refreshSlot(ProbePoint p) {
        if (p.slot == 0) return;
        boolean boost = boosting && p.insn.boostable() && !p.hasPostHandler() && arch.canBoost(p.insn, p.address, p.slot);
        if (boost == p.boosted) return;
        slots.write(machine, p.slot, arch.slotCode(p.insn, p.address, p.slot, boost));
        p.boosted = boost;
    }

    private void updateArming(ProbePoint p) {
        if (watchText) {
            // a guest write to this text that has not run yet is adopted before the engine writes here
            textWatch.settle(p);
            if (p.textChanged) {
                textChanged.remove(p);
                refreshChangedText(p); // ends in updateArming
                return;
            }
        }
        boolean want = allArmed && p.anyEnabled() && !p.unprobeable && !p.gone;
        if (want != p.armed && optimizer != null) optimizer.beforeTextWrite(p.address, p.saved.length);
        if (want && !p.armed) {
            machine.writeVirtual(p.address, arch.breakpoint());
            machine.invalidateCode(p.address, p.saved.length);
            p.armed = true;
        } else if (!want && p.armed) {
            machine.writeVirtual(p.address, p.saved);
            machine.invalidateCode(p.address, p.saved.length);
            p.armed = false;
        }
    }

    private void removePoint(ProbePoint p) {
        p.children.clear();
        updateArming(p);
        points.remove(p.address);
        byAddress.remove(p.address);
        if (p.slot != 0) {
            stepTraps.remove(p.stepTrap(arch));
            boolean stepping = false;
            for (Activation a : active) stepping |= a.point == p;
            if (!stepping) slots.free(p.slot);
        }
        if (watchText) textWatch.unwatch(p);
        textChanged.remove(p);
        if (optimizer != null) optimizer.probeRemoved(p.address);
    }

    /** Guest text with every armed breakpoint replaced by the original bytes (recover_probed_instruction). */
    byte[] originalText(long va, int len) {
        byte[] b = machine.readVirtual(va, len);
        // only points whose saved bytes can overlap [va, va + len): a breakpoint is at most 4 bytes
        for (ProbePoint p : byAddress.subMap(va - 8, true, va + len, false).values()) {
            if (!p.armed) continue;
            for (int i = 0; i < p.saved.length; i++) {
                long off = p.address + i - va;
                if (off >= 0 && off < len) b[(int) off] = p.saved[i];
            }
        }
        if (optimizer != null) optimizer.recoverText(va, b);
        return b;
    }

    // ------------------------------------------------------------------ text coherence

    private void onTextWrite(ProbePoint p, long physical, int size) {
        if (p.overwritten == null) p.overwritten = new boolean[p.saved.length];
        for (int i = 0; i < p.saved.length; i++) {
            long b = p.physical + i;
            if (Long.compareUnsigned(b - physical, size) < 0) p.overwritten[i] = true;
        }
        p.textChanged = true;
        textChanged.add(p);
    }

    /**
     * Applies recorded guest writes to probed text: the new original bytes are kept, the
     * instruction re-decoded and the slot rewritten, and the breakpoint re-armed if the guest
     * overwrote it. Runs at every trap and slice boundary; callable any time.
     */
    public void syncText() {
        if (textChanged.isEmpty()) return;
        for (ProbePoint p : new ArrayList<>(textChanged)) refreshChangedText(p);
        textChanged.clear();
    }

    private void refreshChangedText(ProbePoint p) {
        if (!p.textChanged) return;
        p.textChanged = false;
        byte[] now = machine.readVirtual(p.address, p.saved.length);
        boolean bpGone = false;
        for (int i = 0; i < p.saved.length; i++) {
            if (p.overwritten != null && p.overwritten[i]) {
                p.saved[i] = now[i];
                bpGone = true;
            }
        }
        p.overwritten = null;
        if (bpGone) p.armed = false;
        if (p.slot != 0) stepTraps.remove(p.stepTrap(arch));
        try {
            ArchInsn insn = arch.prepare(p.address, this::originalText, p.symbol);
            if (insn.outOfLine() && p.slot == 0) {
                ensureSlotsMapped();
                p.slot = slots.allocate();
            }
            p.insn = insn;
            p.boosted = false;
            if (insn.outOfLine()) {
                slots.write(machine, p.slot, arch.slotCode(insn, p.address, p.slot, false));
                stepTraps.put(p.stepTrap(arch), p);
                refreshSlot(p);
            }
            if (p.unprobeable) LOG.log(Level.INFO, "kprobes: text at 0x{0} is probeable again", Long.toHexString(p.address));
            p.unprobeable = false;
        } catch (KprobeException e) {
            LOG.log(Level.WARNING, "kprobes: guest rewrote probed text at 0x{0} into an instruction that cannot be probed ({1}); probe stays disarmed",
                    Long.toHexString(p.address), e.getMessage());
            p.unprobeable = true;
            if (p.armed) {
                machine.writeVirtual(p.address, p.saved);
                machine.invalidateCode(p.address, p.saved.length);
                p.armed = false;
            }
        }
        updateArming(p);
    }

    // ------------------------------------------------------------------ hit path

    @Override
    public boolean onBreakpoint(Machine m, long address, int immediate) {
        if (!textChanged.isEmpty()) syncText();
        ProbePoint p = points.get(address);
        if (p != null && p.armed) {
            onHit(p);
            return true;
        }
        Activation top = active.peek();
        if (top != null && (top.status == Status.HIT_SS || top.status == Status.REENTER) && top.point.slot != 0
                && address == top.point.stepTrap(arch)) {
            machine.setPc(top.point.address + top.point.insn.length());
            finishStep(top);
            return true;
        }
        if (address == trampoline) {
            onKretprobeReturn();
            return true;
        }
        if (formerProbeAddresses.contains(address) && !isBreakpointAt(address)) {
            // hit a breakpoint that was removed meanwhile: run the original instruction
            machine.setPc(address);
            return true;
        }
        return false;
    }

    private boolean isBreakpointAt(long address) {
        try {
            return java.util.Arrays.equals(machine.readVirtual(address, arch.breakpoint().length), arch.breakpoint());
        } catch (Machine.GuestMemoryException e) {
            return false;
        }
    }

    private void onHit(ProbePoint p) {
        if (p.ftrace) ftraceCall(p);
        if (!active.isEmpty()) {
            // kprobe_running(): no handlers, count a miss, still run the instruction
            p.missed();
            if (active.peek().status == Status.REENTER) {
                LOG.log(Level.ERROR, "kprobes: Unrecoverable kprobe detected. (hit at 0x{0} while stepping a reentered probe)", Long.toHexString(p.address));
            }
            startStep(p, null);
            return;
        }
        Activation a = new Activation(p, Status.HIT_ACTIVE);
        active.push(a);
        if (runPreHandlers(p, p.ftrace ? ftraceRegs : regs)) {
            pop(a);
            return;
        }
        startStep(p, a);
    }

    /**
     * What the CPU does at a kprobe on an ftrace site in Linux, where the site is a call to ftrace's
     * trampoline: the call pushes its return address (the site + its length) just below the
     * function's stack pointer, where the handlers can read it (recorded: {@code -8($stack):symbol}
     * prints {@code do_sys_openat2+0x5/...} at its entry on Debian's 6.1, 6.12 and 7.2). The kernel
     * keeps no red zone, so nothing lives below the stack pointer.
     */
    private void ftraceCall(ProbePoint p) {
        try {
            machine.writeVirtualLong(regs.sp() - 8, p.address + p.insn.length());
        } catch (Machine.GuestMemoryException e) {
            // no stack page below: the real call would have faulted the kernel; nothing to show
        }
    }

    /** {@code setup_singlestep}; {@code a} is null on reentry. */
    private void startStep(ProbePoint p, Activation a) {
        long detour = optimizer == null ? -1 : optimizer.detourFor(p.address);
        if (detour != -1) {
            // setup_detour_execution: a probe queued for optimization runs the detour's displaced copy
            if (a != null) pop(a);
            machine.setPc(detour);
            return;
        }
        if (p.boosted) {
            if (a != null) pop(a);
            machine.setPc(p.slot);
            return;
        }
        if (a == null) {
            a = new Activation(p, Status.REENTER);
            active.push(a);
        } else {
            a.status = Status.HIT_SS;
        }
        if (!p.insn.outOfLine()) {
            arch.simulate(p.insn, p.address, regs);
            finishStep(a);
            return;
        }
        machine.holdInterrupts(true);
        machine.setPc(p.slot);
    }

    /** {@code kprobe_post_process}. */
    private void finishStep(Activation a) {
        if (a.status == Status.REENTER) {
            pop(a);
            return;
        }
        a.status = Status.HIT_SSDONE;
        for (Kprobe k : a.point.children) {
            if (k.isDisabled() || k.postHandler() == null) continue;
            try {
                k.postHandler().handle(k, regs, 0);
            } catch (Throwable t) {
                handlerFailed(k, "post", t);
            }
        }
        pop(a);
    }

    private void pop(Activation a) {
        active.remove(a);
        boolean stepping = false;
        for (Activation x : active) stepping |= x.status == Status.HIT_SS || x.status == Status.REENTER;
        machine.holdInterrupts(stepping);
    }

    /** {@code aggr_pre_handler}: newest first; a non-zero return stops and skips the step. */
    private boolean runPreHandlers(ProbePoint p, Regs view) {
        for (Kprobe k : p.children) {
            if (k.isDisabled()) continue;
            int r;
            try {
                if (k.owner != null) r = preHandlerKretprobe(k.owner, view);
                else if (k.preHandler() != null) r = k.preHandler().handle(k, view);
                else r = 0;
            } catch (Throwable t) {
                handlerFailed(k, "pre", t);
                r = 0;
            }
            if (r != 0) return true;
        }
        return false;
    }

    /**
     * {@code optimized_callback}: the hand-off of an optimized probe's detour was reached. The live
     * registers are the guest's at the probe; the handlers see the ip the breakpoint path shows
     * ({@link OptimizedRegs}); their return values and ip changes are ignored ({@code opt_pre_handler}).
     */
    private void optimizedHit(long address) {
        if (!textChanged.isEmpty()) syncText();
        ProbePoint p = points.get(address);
        if (p == null || !p.anyEnabled()) return; // unregistered or disabled while a vCPU was in the detour
        if (!active.isEmpty()) {
            p.missed();
            return;
        }
        Activation a = new Activation(p, Status.HIT_ACTIVE);
        active.push(a);
        Regs view = optimizedRegs.at(trapIp(address));
        for (Kprobe k : p.children) {
            if (k.isDisabled()) continue;
            try {
                if (k.owner != null) preHandlerKretprobe(k.owner, view);
                else if (k.preHandler() != null) k.preHandler().handle(k, view);
            } catch (Throwable t) {
                handlerFailed(k, "pre", t);
            }
        }
        pop(a);
    }

    /** The ip a breakpoint hit at {@code address} shows the handlers ({@link ArchKprobes#trapIp}). */
    private long trapIp(long address) {
        return arch.trapIp(address);
    }

    /** The engine as an attached {@link ProbeOptimizer} sees it. */
    private final class OptimizerView implements ProbeOptimizer.Engine {
        @Override public Machine machine() { return machine; }

        @Override public List<Long> probeAddresses() { return List.copyOf(points.keySet()); }

        @Override public List<Long> probeAddresses(long start, long end) {
            if (Long.compareUnsigned(start, end) >= 0) return List.of();
            return List.copyOf(byAddress.subMap(start, true, end, false).keySet());
        }

        @Override
        public ProbeOptimizer.ProbeState probe(long address) {
            ProbePoint p = points.get(address);
            if (p == null) return null;
            return new ProbeOptimizer.ProbeState(p.address, p.symbol, p.armed, p.anyEnabled() && !p.unprobeable && !p.gone, p.hasPostHandler());
        }

        @Override public boolean optimizationAllowed() { return optimizationAllowed; }

        @Override public byte[] originalText(long va, int len) { return Kprobes.this.originalText(va, len); }

        @Override
        public long allocateDetour(int bytes, long near, long reach) {
            ensureSlotsMapped();
            return slots.allocate(bytes, near, reach);
        }

        @Override public void writeDetour(long va, byte[] code) { slots.write(machine, va, code); }

        @Override public void freeDetour(long va, int bytes) { slots.free(va, bytes); }

        @Override public void optimizedHit(long address) { Kprobes.this.optimizedHit(address); }

        @Override
        public void simulate(long address) {
            ProbePoint p = points.get(address);
            ArchInsn insn;
            if (p != null) {
                insn = p.insn;
            } else {
                // unregistered while a vCPU was inside the detour: the text is original again, decode it
                SymbolResolver.SymbolInfo sym = symbols.lookup(address).orElseThrow(
                        () -> new IllegalStateException(String.format("0x%x is in no symbol", address)));
                insn = arch.prepare(address, Kprobes.this::originalText, sym);
            }
            if (insn.outOfLine()) throw new IllegalStateException(String.format("the instruction at 0x%x is not simulated", address));
            arch.simulate(insn, address, regs);
        }
    }

    private void handlerFailed(Kprobe k, String which, Throwable t) {
        if (t instanceof VirtualMachineError vme) throw vme;
        handlerFailures++;
        lastHandlerFailure = t;
        if (t instanceof Machine.GuestMemoryException gme) {
            // the kernel's "fault in a handler": counted as missed, offered to the fault handler
            k.nmissed++;
            if (k.faultHandler() != null) {
                try {
                    k.faultHandler().handle(k, regs, arch.memoryFaultTrap());
                } catch (Throwable t2) {
                    if (t2 instanceof VirtualMachineError vme) throw vme;
                }
            }
        }
        if (failedOnce.add(k)) {
            LOG.log(Level.WARNING, "kprobes: " + which + " handler of " + k + " threw " + t + " (reported once per probe; the guest goes on)", t);
        }
    }

    // ------------------------------------------------------------------ kretprobes

    /** {@code pre_handler_kretprobe}. */
    private int preHandlerKretprobe(Kretprobe rp, Regs regs) {
        ArrayDeque<KretprobeInstance> pool = pools.get(rp);
        KretprobeInstance ri = pool == null ? null : pool.poll();
        if (ri == null) {
            rp.nmissed++;
            return 0;
        }
        ri.retAddr = 0;
        ri.frame = arch.entryFrame(regs);
        ri.task = currentTask.getAsLong();
        if (rp.entryHandler() != null) {
            int r;
            try {
                r = rp.entryHandler().handle(ri, regs);
            } catch (Throwable t) {
                handlerFailed(rp.kp, "entry", t);
                r = 0;
            }
            if (r != 0) {
                pool.push(ri);
                return 0;
            }
        }
        ri.retAddr = arch.swapReturnAddress(regs, trampoline);
        outstanding.add(ri);
        return 0;
    }

    /** The trampoline trapped: run the return handlers of the instances of this frame, newest first, and return for real. */
    private void onKretprobeReturn() {
        long frame = arch.returnFrame(regs);
        List<KretprobeInstance> group = new ArrayList<>(2);
        long real = 0;
        for (int i = outstanding.size() - 1; i >= 0; i--) {
            KretprobeInstance ri = outstanding.get(i);
            if (ri.frame != frame) continue;
            group.add(ri);
            if (ri.retAddr != trampoline) {
                real = ri.retAddr;
                break;
            }
        }
        if (real == 0) {
            LOG.log(Level.ERROR, "kretprobe: Return address not found, not execute handler. Maybe there is a bug in the kernel.");
            machine.requestStop(new StopReason.GuestError("kretprobe: return address not found for frame 0x" + Long.toHexString(frame), machine.pc()));
            return;
        }
        Activation busy = new Activation(group.getFirst().rp == null ? null : group.getFirst().rp.kp.point, Status.HIT_ACTIVE);
        active.push(busy);
        regs.setIp(real);
        for (KretprobeInstance ri : group) {
            Kretprobe rp = ri.rp;
            if (rp == null || rp.handler() == null) continue;
            // rethook: each instance keeps what its entry saw (a kretprobe that ran after another one
            // on the same function saw the trampoline: Linux prints [unknown/kretprobe'd]);
            // kretprobe: __kretprobe_trampoline_handler sets every instance to the real address
            if (!rethook) ri.retAddr = real;
            try {
                rp.handler().handle(ri, regs);
            } catch (Throwable t) {
                handlerFailed(rp.kp, "return", t);
            }
        }
        pop(busy);
        for (KretprobeInstance ri : group) {
            outstanding.remove(ri);
            Kretprobe rp = ri.rp;
            ArrayDeque<KretprobeInstance> pool = rp == null ? null : pools.get(rp);
            if (pool != null) pool.push(ri);
        }
        machine.setPc(real);
    }

    /** Outstanding kretprobe instances (functions entered and not yet returned). */
    public int outstandingInstances() { return outstanding.size(); }

    /**
     * Where the guest's {@code current} task is read at a kretprobe's entry, so that the task's
     * instances can be recycled when it is freed ({@link #flushTask}).
     */
    public Kprobes currentTask(java.util.function.LongSupplier current) {
        this.currentTask = java.util.Objects.requireNonNull(current);
        return this;
    }

    /**
     * The guest freed {@code task} ({@code delayed_put_task_struct}, which in Linux 6.1 calls
     * {@code kprobe_flush_task} and {@code rethook_flush_task}): its outstanding kretprobe
     * instances — functions it entered and never returned from, as {@code do_exit} — go back to
     * their kretprobes' free lists. Returns how many.
     */
    public int flushTask(long task) {
        if (task == 0) return 0;
        int n = 0;
        for (java.util.Iterator<KretprobeInstance> it = outstanding.iterator(); it.hasNext(); ) {
            KretprobeInstance ri = it.next();
            if (ri.task != task) continue;
            it.remove();
            n++;
            Kretprobe rp = ri.rp;
            ArrayDeque<KretprobeInstance> pool = rp == null ? null : pools.get(rp);
            if (pool != null) pool.push(ri);
        }
        return n;
    }

    /**
     * A stack trace as the guest's unwinder would give it from {@code regs}: the ip, then the
     * return addresses of the frame-pointer chain, with every trampoline address replaced by the
     * real return address of its kretprobe instance ({@code kretprobe_find_ret_addr}).
     */
    public long[] stackTrace(Regs r, int max) {
        List<Long> out = new ArrayList<>();
        out.add(fixTrampoline(r.ip(), arch.returnFrame(r)));
        arch.walkFrames(r, (ret, frameKey) -> {
            out.add(fixTrampoline(ret, frameKey));
            return out.size() < max;
        });
        long[] a = new long[out.size()];
        for (int i = 0; i < a.length; i++) a[i] = out.get(i);
        return a;
    }

    private long fixTrampoline(long address, long frameKey) {
        if (address != trampoline) return address;
        for (int i = outstanding.size() - 1; i >= 0; i--) {
            KretprobeInstance ri = outstanding.get(i);
            if (ri.frame == frameKey && ri.retAddr != trampoline) return ri.retAddr;
        }
        return address;
    }

    /**
     * Calls the guest function at {@code function} from a handler (as kernel handlers call kernel
     * functions) and returns its return value. Probes hit during the call count as missed.
     */
    public long callFunction(long function, long... args) {
        return arch.callFunction(machine, function, callStop, args);
    }

    // ------------------------------------------------------------------ faults and safe points

    @Override
    public boolean onFault(Machine m, long pc, int trapnr) {
        if (!textChanged.isEmpty()) syncText();
        if (slots.contains(pc) && !slots.mappedIn(machine)) {
            slots.map(machine, arch); // the guest switched to tables without the slot area
            return true;
        }
        Activation a = active.peek();
        if (a != null && (a.status == Status.HIT_SS || a.status == Status.REENTER) && a.point.slotContains(pc)) {
            if (a.status == Status.HIT_SS) {
                for (Kprobe k : a.point.children) {
                    if (k.isDisabled() || k.faultHandler() == null) continue;
                    int r;
                    try {
                        r = k.faultHandler().handle(k, regs, trapnr);
                    } catch (Throwable t) {
                        handlerFailed(k, "fault", t);
                        r = 0;
                    }
                    if (r != 0) {
                        pop(a);
                        return true;
                    }
                }
            }
            // kprobe_fault_handler: the guest sees the fault at the probed instruction
            machine.setPc(a.point.address);
            pop(a);
            return false;
        }
        if (slots.contains(pc)) for (ProbePoint p : points.values()) {
            if (p.boosted && p.slotContains(pc)) {
                machine.setPc(p.address);
                return false;
            }
        }
        if (optimizer != null && slots.contains(pc)) {
            // detours live in the slot area: a fault anywhere else (every guest page fault) asks nothing
            long original = optimizer.originalAddress(pc);
            if (original != -1) machine.setPc(original); // a fault in a detour's displaced copy: the guest sees the original pc
        }
        return false;
    }

    @Override
    public void onSafePoint(Machine m) {
        if (!textChanged.isEmpty()) syncText();
        if (optimizer != null && active.isEmpty()) optimizer.onSafePoint();
    }

    // ------------------------------------------------------------------ debugfs

    /** The debugfs {@code kprobes/list} file, in the kernel's order (hash bucket, then newest first). */
    public String list() {
        List<ProbePoint> order = new ArrayList<>(points.values());
        order.sort((x, y) -> {
            int bx = hashBucket(x.address), by = hashBucket(y.address);
            return bx != by ? Integer.compare(bx, by) : Long.compare(y.sequence, x.sequence);
        });
        StringBuilder sb = new StringBuilder();
        for (ProbePoint p : order) {
            for (Kprobe k : p.children) {
                sb.append(String.format("%016x  %s  %s+0x%x  %s ", p.address, k.isReturnProbe() ? "r" : "k",
                        p.symbol.name(), p.address - p.symbol.start(), p.symbol.module() == null ? " " : p.symbol.module()));
                if (k.isGone()) sb.append("[GONE]");
                if (k.isDisabled() && !k.isGone()) sb.append("[DISABLED]");
                if (optimizer != null && optimizer.listedOptimized(p.address)) sb.append("[OPTIMIZED]");
                if (p.ftrace) sb.append("[FTRACE]");
                sb.append('\n');
            }
        }
        return sb.toString();
    }

    /** {@code hash_ptr(addr, KPROBE_HASH_BITS)} on 64-bit. */
    static int hashBucket(long address) {
        return (int) ((address * 0x61C8864680B583EBL) >>> (64 - HASH_BITS));
    }

    /** The registered probe at an address ({@code get_kprobe}), newest child first. */
    public List<Kprobe> probesAt(long address) {
        ProbePoint p = points.get(address);
        return p == null ? List.of() : List.copyOf(p.children);
    }

    /** True when the breakpoint at {@code address} is in guest memory. */
    public boolean isArmed(long address) {
        ProbePoint p = points.get(address);
        return p != null && p.armed;
    }

    /** The original bytes kept for the probe at {@code address}. */
    public Optional<byte[]> savedBytes(long address) {
        ProbePoint p = points.get(address);
        return p == null ? Optional.empty() : Optional.of(p.saved.clone());
    }

    /** True when the probe at {@code address} runs a copy from a slot with a jump back (boosted). */
    public boolean isBoosted(long address) {
        ProbePoint p = points.get(address);
        return p != null && p.boosted;
    }

    /** Slots in use, including the trampoline and the call-return stop. */
    public int slotsInUse() { return slots.slotsInUse(); }

    /**
     * {@code bytes} of the host area for data the guest reads (a tracepoint's probe list, which
     * the host hands the kernel), written with {@code data}; its guest-virtual address. ENOMEM
     * when the area is full.
     */
    public long allocateHostData(byte[] data) {
        long va = slots.allocate(data.length, slots.virtualBase(), Long.MAX_VALUE);
        slots.write(machine, va, data);
        return va;
    }

    /** Frees what {@link #allocateHostData} returned. */
    public void freeHostData(long va, int bytes) { slots.free(va, bytes); }

    /** Removes every probe (restoring the original bytes) and detaches from the machine. */
    @Override
    public void close() {
        for (ProbePoint p : new ArrayList<>(points.values())) {
            for (Kprobe k : new ArrayList<>(p.children)) k.point = null;
            removePoint(p);
        }
        if (optimizer != null) {
            optimizer.close();
            optimizer = null;
        }
        if (kernelTrampolineText != null) restoreKernelTrampoline();
        if (machine.trapHandler() == this) machine.setTrapHandler(null);
        machine.holdInterrupts(false);
        arch.close();
    }
}
