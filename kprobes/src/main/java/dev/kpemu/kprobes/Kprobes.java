package dev.kpemu.kprobes;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

import dev.kpemu.machine.Machine;
import dev.kpemu.machine.FaultInterest;
import dev.kpemu.machine.TrapHandler;

/**
 * The kprobes engine bound to one machine ({@code kernel/kprobes.c}): registration with the
 * kernel's checks and errno values, aggregation, arming through breakpoints written into guest
 * text, the hit path (pre handler, out-of-line step or simulation, post handler), reentry,
 * kretprobes with a trampoline in slot memory, the global arm switch and {@code kprobes/list}.
 *
 * <p>It installs itself as the machine's {@link TrapHandler}: breakpoints that are not its own
 * go on to the guest. Everything runs on the emulating thread (handlers run inside Unicorn's
 * interrupt hook); registration from handlers is allowed.
 *
 * <p>This class is the façade; each concern lives in its own package-private class:
 * {@link ProbeRegistration} (register, aggregate, enable, kill), {@link ProbeTable} (the
 * registry), {@link ProbeArming} (breakpoints, boosting, text coherence), {@link HitPath}
 * (breakpoint hits, steps, reentry, faults), {@link Activations} ({@code current_kprobe}),
 * {@link ReturnProbes} (kretprobes and their instances), {@link OptimizerBridge} and
 * {@link OptimizerView} (jump optimization), {@link ProbeListing} ({@code kprobes/list}) and
 * {@link HandlerFailures}.
 */
public final class Kprobes implements TrapHandler, AutoCloseable {
    /** Default {@code maxactive} with one vCPU: max(10, 2 × 1); see {@link #defaultMaxactive()}. */
    public static final int DEFAULT_MAXACTIVE = ReturnProbes.DEFAULT_MAXACTIVE;

    private final Machine machine;
    private final ArchKprobes arch;
    private final Regs regs;
    private final SymbolResolver symbols;
    private final SlotArea slots;
    private final ProbeTable table = new ProbeTable();
    private final Activations active;
    private final HandlerFailures failures;
    private final OptimizerBridge optimizers;
    private final ProbeArming arming;
    private final ReturnProbes returns;
    private final HitPath hits;
    private final ProbeRegistration registration;
    private final ProbeListing listing;
    private final RecordedHits recorded;
    private final FaultInterest faultInterest = new FaultInterest();

    private Kprobes(Machine machine, ArchKprobes arch, SymbolResolver symbols, SlotArea slots) {
        this.machine = machine;
        this.arch = arch;
        this.regs = arch.regs();
        this.symbols = symbols;
        this.slots = slots;
        this.active = new Activations(machine);
        this.failures = new HandlerFailures(arch, regs);
        this.optimizers = new OptimizerBridge(table);
        // the engine's faults: those of its slot area (HitPath.onFault acts on no other pc), and all while text waits to be synced
        faultInterest.ownPcs(slots.virtualBase(), slots.virtualBase() + slots.size());
        this.arming = new ProbeArming(machine, arch, slots, table, active, optimizers, faultInterest);
        this.returns = new ReturnProbes(machine, arch, slots, active, failures);
        this.hits = new HitPath(machine, arch, slots, table, active, arming, returns, failures, optimizers);
        this.registration = new ProbeRegistration(symbols, slots, arch, table, arming, returns, optimizers);
        this.listing = new ProbeListing(table, optimizers);
        this.recorded = new RecordedHits(machine, arch, table, optimizers, failures, returns);
        arming.onChange(recorded::changed);
    }

    /** An engine for {@code machine}'s arch, installed as its trap handler. */
    public static Kprobes attach(Machine machine, SymbolResolver symbols, SlotArea slots) {
        ArchKprobes arch = ArchBackEnds.kprobes(machine);
        Kprobes k = new Kprobes(machine, arch, symbols, slots);
        machine.setTrapHandler(k);
        return k;
    }

    public Machine machine() { return machine; }

    /** The live registers of {@code machine}'s current vCPU, as a handler sees them, without an engine attached. */
    public static Regs liveRegs(Machine machine) { return ArchBackEnds.kprobes(machine).regs(); }

    public Regs regs() { return regs; }

    /**
     * From a pre handler at a function's entry: the function returns {@code retval} to its caller
     * without running its body, as Linux's fail_function does; the handler then returns 1.
     */
    public void overrideFunctionWithReturn(Regs r, long retval) { arch.overrideFunctionWithReturn(r, retval); }

    /** From a pre handler at a function's entry: where the function will return to. */
    public long returnAddressAtEntry(Regs r) { return arch.returnAddressAtEntry(r); }

    public Blacklist blacklist() { return registration.blacklist(); }

    /**
     * Allows probes the kernel refuses: blacklisted ranges and every {@link AddressRules} refusal
     * (off by default, as in the kernel). kpemu's handlers run on the host, so such probes cannot
     * recurse into kprobes; this is kpemu's extension.
     */
    public Kprobes allowUnsafe(boolean allow) {
        registration.allowUnsafe(allow);
        return this;
    }

    public boolean allowsUnsafe() { return registration.allowsUnsafe(); }

    /** The kernel's address rules every registration checks (default: none). */
    public Kprobes rules(AddressRules rules) {
        registration.rules(rules);
        return this;
    }

    /**
     * Keeps saved original bytes in step with guest writes to probed text (on by default; a native
     * check before blocks that contain probed text, see {@link TextWatch}).
     */
    public Kprobes watchText(boolean watch) {
        arming.watchText(watch);
        return this;
    }

    /**
     * Boosting on or off (on by default). Linux boosts only on non-preemptible kernels
     * ({@code !CONFIG_PREEMPTION}); turning it off makes every copy end with a trap.
     */
    public Kprobes boosting(boolean on) {
        arming.boosting(on);
        return this;
    }

    // ------------------------------------------------------------------ jump optimization

    /**
     * Attaches jump optimization (module {@code optprobes}): {@code factory} gets the engine's
     * {@link ProbeOptimizer.Engine} view. Probes already registered are offered to it.
     */
    public <T extends ProbeOptimizer> T attachOptimizer(java.util.function.Function<ProbeOptimizer.Engine, T> factory) {
        return optimizers.attach(factory, new OptimizerView(machine, arch, symbols, slots, table, arming, optimizers, hits, recorded));
    }

    /** The attached optimizer, or null. */
    public ProbeOptimizer optimizer() { return optimizers.optimizer(); }

    /**
     * {@code debug.kprobes_optimization} (1 by default, as Linux at boot): 0 unoptimizes every
     * probe (each becomes a breakpoint probe), 1 lets the optimizer optimize them again.
     */
    public Kprobes optimization(boolean allow) {
        optimizers.optimization(allow);
        return this;
    }

    /** Reads {@code debug.kprobes_optimization}. */
    public boolean optimization() { return optimizers.optimizationAllowed(); }

    /** True when {@code kprobes/list} shows the probe at {@code address} as {@code [OPTIMIZED]}. */
    public boolean isOptimized(long address) { return optimizers.isOptimized(address); }

    // ------------------------------------------------------------------ kretprobe trampoline

    /** The address of the kretprobe trampoline (slot memory, or the kernel's own: {@link #kretprobeTrampolineAt}). */
    public long trampolineAddress() { return returns.trampolineAddress(); }

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
        returns.kretprobeTrampolineAt(va, rethook);
        return this;
    }

    /** Java exceptions thrown by handlers so far (each was caught; the guest went on). */
    public long handlerFailures() { return failures.count(); }

    public Throwable lastHandlerFailure() { return failures.last(); }

    // ------------------------------------------------------------------ registration

    /** {@code register_kprobe}. Throws {@link KprobeException} with the kernel's errno. */
    public void register(Kprobe p) { recorded.changed(); registration.register(p); }

    /** {@code register_kprobes}: all or nothing; on the first failure the earlier ones are unregistered. */
    public void registerAll(List<Kprobe> probes) { registration.registerAll(probes); }

    /** {@code unregister_kprobe}: never fails; a probe that is not registered gets address 0 if it was given by symbol. */
    public void unregister(Kprobe p) { recorded.changed(); registration.unregister(p); }

    public void unregisterAll(List<Kprobe> probes) {
        for (Kprobe p : probes) unregister(p);
    }

    /** {@code register_kretprobe}. */
    public void register(Kretprobe rp) { recorded.changed(); registration.register(rp); }

    public void registerAllKretprobes(List<Kretprobe> rps) { registration.registerAllKretprobes(rps); }

    /** {@code unregister_kretprobe}: outstanding instances still return correctly but run no handler. */
    public void unregister(Kretprobe rp) { recorded.changed(); registration.unregister(rp); }

    public void unregisterAllKretprobes(List<Kretprobe> rps) {
        for (Kretprobe rp : rps) unregister(rp);
    }

    /** Registers a kprobe or a kretprobe ({@link #register(Kprobe)}, {@link #register(Kretprobe)}). */
    public void register(Probe p) {
        switch (p) {
            case Kprobe k -> register(k);
            case Kretprobe rp -> register(rp);
        }
    }

    /** Unregisters a kprobe or a kretprobe ({@link #unregister(Kprobe)}, {@link #unregister(Kretprobe)}). */
    public void unregister(Probe p) {
        switch (p) {
            case Kprobe k -> unregister(k);
            case Kretprobe rp -> unregister(rp);
        }
    }

    /** {@code disable_kprobe}. */
    public void disable(Kprobe p) { recorded.changed(); registration.disable(p); }

    /**
     * {@code kprobe_free_init_mem}: the kernel is about to free [start, end) (its init memory);
     * every probe there is killed ({@code kill_kprobe}): its original text is put back now, before
     * the memory is reused, it never fires again and {@link #list()} shows it {@code [GONE]}.
     */
    public void killRange(long start, long end) { recorded.changed(); registration.killRange(start, end); }

    /** {@code enable_kprobe}. */
    public void enable(Kprobe p) { recorded.changed(); registration.enable(p); }

    /** {@code disable_kprobe} on a kprobe or a kretprobe's entry probe. */
    public void disable(Probe p) { disable(p.entryProbe()); }

    /** {@code enable_kprobe} on a kprobe or a kretprobe's entry probe. */
    public void enable(Probe p) { enable(p.entryProbe()); }

    public void disable(Kretprobe rp) { disable(rp.kp); }

    public void enable(Kretprobe rp) { enable(rp.kp); }

    /** debugfs {@code kprobes/enabled} = 1: arms every registered, enabled probe (their own disabled state is kept). */
    public void armAll() { arming.armAll(); }

    /** debugfs {@code kprobes/enabled} = 0: disarms everything, keeping each probe's own disabled state. */
    public void disarmAll() { arming.disarmAll(); }

    /** Reads debugfs {@code kprobes/enabled}. */
    public boolean allArmed() { return arming.allArmed(); }

    /**
     * Applies recorded guest writes to probed text: the new original bytes are kept, the
     * instruction re-decoded and the slot rewritten, and the breakpoint re-armed if the guest
     * overwrote it. Runs at every trap and slice boundary; callable any time.
     */
    public void syncText() { arming.syncText(); }

    // ------------------------------------------------------------------ traps

    @Override
    public boolean onBreakpoint(Machine m, long address, int immediate) { return hits.onBreakpoint(address); }

    /** Breakpoints are told apart by address ({@code kprobe_breakpoint_handler} and the step's trap). */
    @Override
    public boolean usesBreakpointImmediate() { return false; }

    @Override
    public boolean onFault(Machine m, long pc, int trapnr) { return hits.onFault(pc, trapnr); }

    @Override
    public FaultInterest faultInterest() { return faultInterest; }

    @Override
    public void onSafePoint(Machine m) {
        hits.onSafePoint();
        recorded.onSafePoint();
        if (safePointActions.isEmpty()) return;
        List<Runnable> now = new ArrayList<>(safePointActions);
        safePointActions.clear();
        for (Runnable r : now) r.run();
    }

    private final List<Runnable> safePointActions = new ArrayList<>();

    /**
     * The guest words a hit recorded by the machine's native code captures ({@link RecordedHit}:
     * word 0 the current task); null: none recorded. Given by the event engine, which knows where
     * the booted kernel keeps them.
     */
    public void recordHitsWith(dev.kpemu.machine.RecordedProbeHits.Word[] words) { recorded.words(words); }

    /**
     * Where register {@code name} sits among the registers a recorded hit captures (the number a
     * {@link dev.kpemu.machine.RecordedProbeHits.Base#REGISTER} word names), or -1 when none is.
     */
    public int recordedRegister(String name) {
        String[] r = arch.recordedRegisters();
        if (r != null) for (int i = 0; i < r.length; i++) if (r[i].equals(name)) return i;
        return -1;
    }

    /** A {@link RecordedHitHandler}'s answer may have changed: the engine asks again at its next safe point. */
    public void recordedHitsChanged() { recorded.changed(); }

    /** Hits the machine's native code recorded so far. */
    public long recordedHits() { return recorded.recorded(); }

    /** Trace lines of recorded hits that the machine's native code formatted ({@link RecordedHitHandler#lineFormat}). */
    public long recordedLines() { return recorded.linesFormatted(); }

    /** Kretprobe entries the machine's native code recorded (an instance taken and the return address swapped at the hit). */
    public long recordedReturnEntries() { return recorded.returnEntries(); }

    /** Kretprobe returns the machine's native code recorded at the trampoline ({@link RecordedReturnHandler}). */
    public long recordedReturns() { return recorded.recordedReturns(); }

    /** Recorded kretprobe returns whose native lines went on as text ({@link RecordedReturnHandler#returnLineSink}). */
    public long passedReturnLines() { return recorded.passedReturnLines(); }

    /** Recorded hits whose native lines went on as text, several at once ({@link RecordedHitHandler#lineSink}). */
    public long passedLines() { return recorded.passedLines(); }

    /**
     * Runs {@code action} at the run loop's next safe point (between slices, the running slice
     * ended at its next block boundary): where a handler's change of the machine's memory map
     * (a watchpoint moved by a trigger) is made, not inside the hook that asked for it.
     */
    public void atSafePoint(Runnable action) {
        safePointActions.add(Objects.requireNonNull(action));
        machine.endSliceSoon();
    }

    // ------------------------------------------------------------------ kretprobe instances

    /**
     * The {@code maxactive} a kretprobe registered with 0 gets on this machine: Linux's
     * {@code max(10, 2 * num_possible_cpus())}, the machine's vCPUs being the possible CPUs.
     */
    public int defaultMaxactive() { return returns.defaultMaxactive(); }

    /** Outstanding kretprobe instances (functions entered and not yet returned). */
    public int outstandingInstances() { return returns.outstandingInstances(); }

    /**
     * Where the guest's {@code current} task is read at a kretprobe's entry, so that the task's
     * instances can be recycled when it is freed ({@link #flushTask}).
     */
    public Kprobes currentTask(java.util.function.LongSupplier current) {
        returns.currentTask(current);
        return this;
    }

    /**
     * The guest freed {@code task} ({@code delayed_put_task_struct}, which in Linux 6.1 calls
     * {@code kprobe_flush_task} and {@code rethook_flush_task}): its outstanding kretprobe
     * instances — functions it entered and never returned from, as {@code do_exit} — go back to
     * their kretprobes' free lists. Returns how many.
     */
    public int flushTask(long task) { return returns.flushTask(task); }

    /**
     * A stack trace as the guest's unwinder would give it from {@code regs}: the ip, then the
     * return addresses of the frame-pointer chain, with every trampoline address replaced by the
     * real return address of its kretprobe instance ({@code kretprobe_find_ret_addr}).
     */
    public long[] stackTrace(Regs r, int max) { return returns.stackTrace(r, max); }

    // ------------------------------------------------------------------ debugfs and queries

    /** The debugfs {@code kprobes/list} file, in the kernel's order (hash bucket, then newest first). */
    public String list() { return listing.list(); }

    /** The registered probe at an address ({@code get_kprobe}), newest child first. */
    public List<Kprobe> probesAt(long address) { return table.probesAt(address); }

    /** True when the breakpoint at {@code address} is in guest memory. */
    public boolean isArmed(long address) { return table.isArmed(address); }

    /** The original bytes kept for the probe at {@code address}. */
    public Optional<byte[]> savedBytes(long address) { return table.savedBytes(address); }

    /** True when the probe at {@code address} runs a copy from a slot with a jump back (boosted). */
    public boolean isBoosted(long address) { return table.isBoosted(address); }

    // ------------------------------------------------------------------ slot memory

    /** Slots in use, including the trampoline's (while it lives in slot memory) and host data. */
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
        registration.removeAll();
        optimizers.close();
        returns.close();
        if (machine.trapHandler() == this) machine.setTrapHandler(null);
        machine.holdInterrupts(false);
        arch.close();
    }
}
