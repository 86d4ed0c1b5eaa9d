package dev.kpemu.optprobes;

import dev.kpemu.decoder.Decoder;
import dev.kpemu.decoder.Instruction;
import dev.kpemu.kprobes.KprobeException;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.kprobes.ProbeOptimizer;
import dev.kpemu.kprobes.SymbolResolver;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.optprobes.DetourBuffer.Style;
import dev.kpemu.unicorn.Unicorn;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Jump optimization wired into the kprobes engine (Linux's optimizer in {@code kernel/kprobes.c}
 * plus {@code arch/x86/kernel/kprobes/opt.c}). Attach with {@link #attach(Kprobes)}.
 *
 * <h2>Life of a probe</h2>
 * <ol>
 * <li><b>Breakpoint.</b> A registered probe starts as a breakpoint probe. Whenever the engine
 *     reports a change (register, unregister, enable, disable, a child added to the aggregate, the
 *     global arm switch, {@code debug.kprobes_optimization}) the sites in the changed probe's
 *     function are checked again with {@link OptimizationSafety#check} (its rules look only at the
 *     function: its text, its other probes; every site when the function is unknown), so
 *     registering n probes costs n checks, not n². A refusal for a permanent reason is remembered until the
 *     probe is removed; temporary reasons (post handler, another probe in the region, disabled,
 *     optimization off) are checked again at the next change.</li>
 * <li><b>Queued</b> (Linux: {@code KPROBE_FLAG_OPTIMIZED} set, on the optimizing list). The detour
 *     is built in slot memory ({@link Style#LIVE_REGISTERS}: the hand-off is the buffer's first
 *     instruction), its block hooks are added, and the translated code of the buffer is dropped so
 *     the hooks are in every translation. A breakpoint hit now runs the handlers on the breakpoint
 *     path and continues at the detour's displaced code (no single step;
 *     {@code setup_detour_execution}). {@code kprobes/list} already shows {@code [OPTIMIZED]}, as
 *     Linux does from this point.</li>
 * <li><b>Optimized.</b> At the first safe point (run-loop slice boundary) after the delay
 *     ({@link #DEFAULT_DELAY}, Linux's {@code OPTIMIZE_DELAY} of 5 jiffies, taken as 20 ms of guest
 *     time = 5 jiffies at Debian's HZ=250), when no vCPU runs a kprobes handler or has a step in
 *     flight, the inputs' patch window is open (on every vCPU) and no vCPU's pc is in the interior
 *     of the displaced region ({@link DisplacedRegion#interior}; {@link Vcpus}), the jump is
 *     written ({@link SitePatch#optimized()}) and the translated code of the site dropped. A pc in
 *     the interior postpones the write to a later safe point.</li>
 * <li><b>Unoptimized.</b> Before the engine writes text overlapping an optimized site (another
 *     probe armed in the region, disable, disarm, unregister) the site gets its breakpoint form back
 *     ({@link SitePatch#breakpoint()}: x86 {@code int3} + the original bytes, arm64 {@code BRK}), as
 *     Linux's forced unoptimization; a post handler or the switch turned off unoptimizes at once
 *     too. When the condition clears, the probe is queued again (and waits the delay again).</li>
 * <li><b>Removed.</b> The buffer and its hooks are freed at a later safe point where no vCPU's pc
 *     is inside it.</li>
 * </ol>
 *
 * <h2>Hit path</h2>
 * The jump leads to the detour; its first instruction carries a block hook that calls the engine's
 * {@code optimizedHit} (Linux's {@code optimized_callback}): pre handlers run on the live registers,
 * which are the guest's registers at the probe; {@code ip} reads as on the breakpoint path — x86
 * probe + 1 (after the {@code int3}), arm64 the probe address (at the {@code BRK}) — and changes to it
 * (and to the stack pointer) are ignored; reentry counts {@code nmissed} and runs no handler. Then
 * the displaced instructions run (x86 relocated copies; arm64 a copy, or a second hook that
 * simulates a PC-relative instruction on the host) and a jump goes back after the region.
 */
public final class JumpOptimizer implements ProbeOptimizer {
    private static final System.Logger LOG = System.getLogger("dev.kpemu.optprobes");

    /** Linux's {@code OPTIMIZE_DELAY}: 5 jiffies, at HZ=250 (Debian's kernels). */
    public static final Duration DEFAULT_DELAY = Duration.ofMillis(20);

    /** The optimization state of a probe point. */
    public enum State {
        /** A breakpoint probe (not optimizable now, or not yet checked). */
        BREAKPOINT,
        /** Detour ready, jump not written yet; breakpoint hits take the detour's displaced code. */
        QUEUED,
        /** The jump is in guest text. */
        OPTIMIZED
    }


    private final ProbeOptimizer.Engine engine;
    private final Machine machine;
    private final Decoder decoder;
    private final OptimizationInputs inputs;
    private final Map<Long, Site> sites = new LinkedHashMap<>();
    /** More bytes than any patch the optimizer writes (a jump: 5 bytes on x86, 4 on arm64). */
    private static final int MAX_PATCH = 16;
    /** More bytes than any displaced region (a jump's worth of whole instructions: at most 4 + 15 on x86). */
    private static final int MAX_REGION = 64;
    /** {@link #sites} by address (unsigned): a change re-checks only the sites in the changed probe's function. */
    private final java.util.NavigableMap<Long, Site> sitesByAddress = new java.util.TreeMap<>(Long::compareUnsigned);
    /** The same sites for {@link #detourFor}, which every probe hit asks (no boxing). */
    private final dev.kpemu.kprobes.AddressIndex<Site> siteAt = new dev.kpemu.kprobes.AddressIndex<>();
    private final List<Site> retired = new ArrayList<>();
    /** Hooks of released buffers, inert, deleted only by {@link #close()} (see {@link #release}). */
    private final List<Placed> inertHooks = new ArrayList<>();

    /** A block hook and the vCPU engine it was added to (a hook belongs to one engine). */
    private record Placed(Unicorn engine, Unicorn.Hook hook) {}
    private long delayNanos = DEFAULT_DELAY.toNanos();
    private int queued;
    private long jumpsWritten, postponedByPc;

    private static final class Site {
        final long address;
        State state = State.BREAKPOINT;
        Verdict verdict;
        /** Refused for a permanent reason: not checked again while registered. */
        boolean permanent;
        DetourBuffer buffer;
        int bufferBytes;
        SitePatch patch;
        /** The buffer's block hooks, in every vCPU's engine; null when none. */
        List<Placed> hooks;
        /** Cleared when the buffer is released: its hooks then do nothing (see {@link #release}). */
        java.util.concurrent.atomic.AtomicBoolean hooksLive;
        long queuedAt;
        /** The probed function's extent at the last check ([fnStart, fnEnd); both 0 before). */
        long fnStart, fnEnd;
        /** Hits through the detour's hand-off (the jump), not through the breakpoint. */
        long detourHits;

        Site(long address) {
            this.address = address;
        }

        DisplacedRegion region() {
            return buffer.region();
        }
    }

    private JumpOptimizer(ProbeOptimizer.Engine engine, OptimizationInputs inputs) {
        this.engine = engine;
        this.machine = engine.machine();
        this.inputs = inputs;
        this.decoder = Decoder.open(machine.arch());
    }

    /** Attaches jump optimization to {@code kprobes} with no kernel tables ({@link OptimizationInputs#NONE}). */
    public static JumpOptimizer attach(Kprobes kprobes) {
        return attach(kprobes, OptimizationInputs.NONE);
    }

    public static JumpOptimizer attach(Kprobes kprobes, OptimizationInputs inputs) {
        return kprobes.attachOptimizer(e -> new JumpOptimizer(e, inputs));
    }

    /** Guest time between a probe becoming optimizable and its jump being written (default {@link #DEFAULT_DELAY}). */
    public JumpOptimizer delay(Duration d) {
        if (d.isNegative()) throw new IllegalArgumentException("negative delay");
        this.delayNanos = d.toNanos();
        return this;
    }

    public Duration delay() { return Duration.ofNanos(delayNanos); }

    /** The state of the probe at {@code address} ({@link State#BREAKPOINT} when unknown). */
    public State state(long address) {
        Site s = sites.get(address);
        return s == null ? State.BREAKPOINT : s.state;
    }

    /** The last safety verdict for the probe at {@code address}, or null. */
    public Verdict verdict(long address) {
        Site s = sites.get(address);
        return s == null ? null : s.verdict;
    }

    /** The last verdict of every probe point, by address. */
    public Map<Long, Verdict> verdicts() {
        Map<Long, Verdict> m = new LinkedHashMap<>();
        sites.forEach((a, s) -> m.put(a, s.verdict));
        return m;
    }

    /** The detour of the probe at {@code address}, or null. */
    public DetourBuffer detour(long address) {
        Site s = sites.get(address);
        return s == null ? null : s.buffer;
    }

    /** Jumps written so far. */
    public long jumpsWritten() { return jumpsWritten; }

    /** Probes whose detour is ready and whose jump is not written yet. */
    public int queued() { return queued; }

    /** Hits of the probe at {@code address} that came through its jump and detour (0 for an unknown address). */
    public long detourHits(long address) {
        Site s = sites.get(address);
        return s == null ? 0 : s.detourHits;
    }

    /** Times a due jump was not written because the pc was inside its displaced region. */
    public long postponedByPc() { return postponedByPc; }

    /**
     * {@code wait_for_kprobe_optimizer}: writes every queued jump now, without waiting for the
     * delay, where the patch window is open and the pc is not inside the region. Call it while
     * the guest is stopped (between runs). Returns how many stay queued.
     */
    public int flush() {
        writeDueJumps(true);
        return queued;
    }

    // ------------------------------------------------------------------ engine notifications

    @Override
    public void probeChanged(long address) {
        ProbeOptimizer.ProbeState st = engine.probe(address);
        if (st != null && !sites.containsKey(address)) {
            Site s = new Site(address);
            sites.put(address, s);
            sitesByAddress.put(address, s);
            siteAt.put(address, s);
        }
        evaluateFunctionOf(address, st);
    }

    /**
     * Checks again the sites a change at {@code address} can affect: Linux's rules look only inside
     * the probed function (its text, its other probes), so the sites in that function; every site
     * when the function is unknown.
     */
    private void evaluateFunctionOf(long address, ProbeOptimizer.ProbeState st) {
        long start, end;
        if (st != null && st.symbol() != null && st.symbol().size() > 0) {
            start = st.symbol().start();
            end = start + st.symbol().size();
        } else {
            Site known = sites.get(address);
            if (known == null || known.fnStart == known.fnEnd) {
                evaluateAll();
                return;
            }
            start = known.fnStart;
            end = known.fnEnd;
        }
        if (Long.compareUnsigned(start, end) >= 0) {
            evaluateAll();
            return;
        }
        for (Site s : List.copyOf(sitesByAddress.subMap(start, true, end, false).values())) evaluate(s);
        Site self = sites.get(address);
        if (self != null && (Long.compareUnsigned(address, start) < 0 || Long.compareUnsigned(address, end) >= 0)) evaluate(self);
    }

    @Override
    public void beforeTextWrite(long address, int length) {
        // only sites whose patch or displaced region can reach [address, address + length)
        long from = address - MAX_REGION;
        if (Long.compareUnsigned(from, address) > 0) from = 0;
        long to = address + length;
        java.util.Collection<Site> near = Long.compareUnsigned(from, to) < 0
                ? List.copyOf(sitesByAddress.subMap(from, true, to, false).values()) : List.copyOf(sites.values());
        for (Site s : near) {
            if (s.state == State.OPTIMIZED && overlaps(s.address, s.patch.length(), address, length)) {
                unoptimize(s);
            } else if (s.state == State.QUEUED && overlaps(s.address, s.region().length(), address, length)) {
                setState(s, State.BREAKPOINT);
            }
        }
    }

    @Override
    public void probeRemoved(long address) {
        Site s = sites.remove(address);
        sitesByAddress.remove(address);
        siteAt.remove(address);
        if (s != null) {
            if (s.state == State.OPTIMIZED) unoptimize(s); // not expected: the engine wrote the text first
            setState(s, State.BREAKPOINT);
            retire(s);
        }
        if (s == null || s.fnStart == s.fnEnd) {
            evaluateAll();
            return;
        }
        for (Site o : List.copyOf(sitesByAddress.subMap(s.fnStart, true, s.fnEnd, false).values())) evaluate(o);
    }

    @Override
    public void onSafePoint() {
        if (!retired.isEmpty()) freeRetired();
        if (queued > 0) writeDueJumps(false);
    }

    @Override
    public long detourFor(long address) {
        Site s = siteAt.get(address);
        return s == null || s.state == State.BREAKPOINT ? -1 : s.buffer.displacedCodeAddress();
    }

    @Override
    public long originalAddress(long pc) {
        for (Site s : sites.values()) {
            long a = originalAddress(s, pc);
            if (a != -1) return a;
        }
        for (Site s : retired) {
            long a = originalAddress(s, pc);
            if (a != -1) return a;
        }
        return -1;
    }

    private static long originalAddress(Site s, long pc) {
        if (s.buffer == null) return -1;
        long at = s.buffer.displacedCodeAddress();
        for (Instruction i : s.region().instructions()) {
            if (pc == at) return i.address();
            at += i.length();
        }
        return -1;
    }

    @Override
    public void recoverText(long va, byte[] buf) {
        // only sites whose patch can overlap [va, va + len): a patch is a few bytes (5 on x86, 4 on arm64)
        long from = va - MAX_PATCH;
        if (Long.compareUnsigned(from, va) > 0) from = 0;
        long to = va + buf.length;
        java.util.Collection<Site> near = Long.compareUnsigned(from, to) < 0 ? sitesByAddress.subMap(from, true, to, false).values() : sites.values();
        for (Site s : near) {
            if (s.state != State.OPTIMIZED) continue;
            byte[] orig = s.patch.original();
            for (int i = 0; i < orig.length; i++) {
                long off = s.address + i - va;
                if (off >= 0 && off < buf.length) buf[(int) off] = orig[i];
            }
        }
    }

    @Override
    public boolean listedOptimized(long address) {
        return state(address) != State.BREAKPOINT;
    }

    @Override
    public void close() {
        for (Site s : sites.values()) {
            if (s.state == State.OPTIMIZED) unoptimize(s);
            setState(s, State.BREAKPOINT);
            release(s);
        }
        sites.clear();
        sitesByAddress.clear();
        siteAt.clear();
        for (Site s : retired) release(s);
        retired.clear();
        for (Placed h : inertHooks) h.engine().delete(h.hook());
        inertHooks.clear();
        decoder.close();
    }

    // ------------------------------------------------------------------ decisions

    private void evaluateAll() {
        for (Site s : List.copyOf(sites.values())) evaluate(s);
    }

    private void evaluate(Site s) {
        ProbeOptimizer.ProbeState st = engine.probe(s.address);
        if (st == null || s.permanent) return;
        if (st.symbol() != null) {
            s.fnStart = st.symbol().start();
            s.fnEnd = st.symbol().start() + st.symbol().size();
        }
        Verdict v;
        if (inputs.ftraceSites().contains(s.address)) {
            // Linux arms a probe on an ftrace site through ftrace and try_to_optimize_kprobe skips it
            // (kprobe_ftrace): refused as the rules would (the displaced region overlaps the site),
            // without decoding the function
            v = new Verdict.Refused(List.of(new Refusal(Refusal.Reason.FTRACE_SITE, s.address,
                    "probed instruction is an ftrace site")), null);
        } else try {
            v = OptimizationSafety.check(decoder, candidate(st));
        } catch (RuntimeException e) {
            // e.g. the function's text is not all mapped: never optimized, the probe keeps working
            LOG.log(Level.DEBUG, "optprobes: cannot check 0x{0}: {1}", Long.toHexString(s.address), e.toString());
            v = new Verdict.Refused(List.of(new Refusal(Refusal.Reason.FUNCTION_UNDECODABLE, s.address, e.toString())), null);
        }
        s.verdict = v;
        if (v instanceof Verdict.Optimizable o) {
            if (s.state != State.BREAKPOINT) return;
            try {
                if (s.buffer == null || !sameRegion(s.region(), o.region())) {
                    retire(s);
                    prepare(s, o.region());
                }
            } catch (OptimizationRefusedException e) {
                s.verdict = new Verdict.Refused(List.of(e.refusal()), o.region());
                s.permanent = true;
                return;
            } catch (KprobeException e) {
                // no slot memory in reach: stays a breakpoint probe (checked again at the next change)
                LOG.log(Level.DEBUG, "optprobes: no detour for 0x{0}: {1}", Long.toHexString(s.address), e.getMessage());
                return;
            }
            s.queuedAt = machine.clock().nanos();
            setState(s, State.QUEUED);
        } else {
            Verdict.Refused r = (Verdict.Refused) v;
            if (s.state == State.OPTIMIZED) unoptimize(s);
            setState(s, State.BREAKPOINT);
            if (!r.onlyTemporary()) {
                s.verdict = r.permanentPart();
                s.permanent = true;
                retire(s);
            }
        }
    }

    private Candidate candidate(ProbeOptimizer.ProbeState st) {
        SymbolResolver.SymbolInfo sym = st.symbol();
        TextRange fn = TextRange.of(sym.start(), sym.size());
        Candidate.Builder b = Candidate.builder(sym.start(), engine.originalText(sym.start(), (int) sym.size()), st.address())
                .postHandler(st.postHandler())
                .enabled(st.enabled() && st.armed())
                .optimizationOn(engine.optimizationAllowed())
                .exceptionTable(inFunction(inputs.exceptionTable(), fn))
                .ftraceSites(inFunction(inputs.ftraceSites(), fn))
                .indirectJumpCheck(inputs.indirectJumpCheck())
                .indirectThunks(inputs.indirectThunks())
                .detectEntryFtraceSite(inputs.detectEntryFtraceSite())
                .landingPadsEnforced(inputs.landingPadsEnforced())
                .groupFormsBoostable(inputs.groupFormsBoostable());
        for (TextRange r : inputs.reservedText(fn)) b.reservedText(r);
        for (long other : engine.probeAddresses(sym.start(), sym.start() + sym.size())) {
            if (other == st.address() || !fn.contains(other)) continue;
            ProbeOptimizer.ProbeState o = engine.probe(other);
            if (o != null && o.armed()) b.otherProbe(other);
        }
        return b.build();
    }

    private static List<Long> inFunction(Set<Long> all, TextRange fn) {
        List<Long> out = new ArrayList<>();
        if (all instanceof java.util.NavigableSet<Long> ns) {
            out.addAll(ns.subSet(fn.start(), true, fn.end(), false));
        } else {
            for (long a : all) if (fn.contains(a)) out.add(a);
        }
        return out;
    }

    private static boolean sameRegion(DisplacedRegion a, DisplacedRegion b) {
        return a.probeAddress() == b.probeAddress() && java.util.Arrays.equals(a.originalBytes(), b.originalBytes());
    }

    // ------------------------------------------------------------------ detours and text

    /** Builds the detour in slot memory and hooks its hand-off (before the buffer can first run). */
    private void prepare(Site s, DisplacedRegion region) {
        Arch arch = machine.arch();
        int size;
        try {
            size = DetourBuffer.build(region, s.address, Style.LIVE_REGISTERS).size();
        } catch (OptimizationRefusedException e) {
            size = DetourBuffer.maxSize(arch);
        }
        long va = engine.allocateDetour(size, s.address, ArchOptimizer.of(arch).detourReach());
        try {
            DetourBuffer b = DetourBuffer.build(region, va, Style.LIVE_REGISTERS);
            SitePatch patch = SitePatch.of(b);
            engine.writeDetour(va, b.code());
            // Block hooks, not code hooks: with any UC_HOOK_CODE installed, Unicorn 2.1.1 rewinds the
            // pc to the previous block's start when the instruction clock stops the engine from its
            // block hook (measured on both arches), which breaks the run loop. A block hook fires
            // when a translated block starts at the address: the hand-off is the buffer's first
            // instruction, the target of the site's jump, so every jump through it starts a block
            // there; the int3 path enters at the displaced code and runs no handler.
            final long probe = s.address;
            final long handOff = b.handOffAddress();
            final java.util.concurrent.atomic.AtomicBoolean live = new java.util.concurrent.atomic.AtomicBoolean(true);
            s.hooksLive = live;
            if (handOff != va) throw new IllegalStateException("the hand-off must be the buffer's first instruction");
            if (b.simulateAddress().isPresent()) {
                // arm64 PC-relative instruction: simulated on the host right after the handlers (the
                // pc write leaves the buffer); a breakpoint hit enters at the simulate address itself
                long sim = b.simulateAddress().getAsLong();
                s.hooks = inEveryEngine(uc -> uc.hookBlock(handOff, handOff, (u, a, n) -> {
                    if (!live.get()) return;
                    s.detourHits++;
                    engine.optimizedHit(probe);
                    engine.simulate(probe);
                }));
                s.hooks.addAll(inEveryEngine(uc -> uc.hookBlock(sim, sim, (u, a, n) -> {
                    if (live.get()) engine.simulate(probe);
                })));
            } else {
                s.hooks = inEveryEngine(uc -> uc.hookBlock(handOff, handOff, (u, a, n) -> {
                    if (!live.get()) return;
                    s.detourHits++;
                    engine.optimizedHit(probe);
                }));
            }
            // hooks added after a translation may not fire in it: translate the buffer afresh
            machine.invalidateCode(va, b.size());
            s.buffer = b;
            s.bufferBytes = size;
            s.patch = patch;
        } catch (RuntimeException e) {
            if (s.hooksLive != null) s.hooksLive.set(false);
            if (s.hooks != null) for (Placed h : s.hooks) h.engine().delete(h.hook());
            s.hooks = null;
            engine.freeDetour(va, size);
            throw e;
        }
    }

    private void writeDueJumps(boolean ignoreDelay) {
        if (queued == 0 || !inputs.patchWindowOpen(machine)) return;
        long now = machine.clock().nanos();
        long[] pcs = Vcpus.pcs(machine, ArchOptimizer.of(machine.arch()));
        for (Site s : sites.values()) {
            if (s.state != State.QUEUED || (!ignoreDelay && now - s.queuedAt < delayNanos)) continue;
            if (anyInterior(s.region(), pcs)) {
                postponedByPc++;
                continue; // a vCPU inside the displaced region would resume in the middle of the jump
            }
            machine.writeVirtual(s.address, s.patch.optimized());
            machine.invalidateCode(s.address, s.patch.length());
            jumpsWritten++;
            setState(s, State.OPTIMIZED);
        }
    }

    /** The jump goes, the breakpoint form comes back (Linux {@code arch_unoptimize_kprobe}). */
    private void unoptimize(Site s) {
        machine.writeVirtual(s.address, s.patch.breakpoint());
        machine.invalidateCode(s.address, s.patch.length());
        setState(s, State.BREAKPOINT);
    }

    private void setState(Site s, State to) {
        if ((s.state == State.BREAKPOINT) != (to == State.BREAKPOINT)) engine.detourChanged(s.address);   // detourFor's answer
        if (s.state == State.QUEUED) queued--;
        if (to == State.QUEUED) queued++;
        s.state = to;
    }

    /**
     * The buffer leaves the site; it keeps its hooks (a vCPU inside it still needs them: a handler
     * may unregister its own probe, and the arm64 simulation comes after the handlers) until a
     * safe point where the pc is not inside it frees both.
     */
    private void retire(Site s) {
        if (s.buffer == null) return;
        Site old = new Site(s.address);
        old.buffer = s.buffer;
        old.bufferBytes = s.bufferBytes;
        old.hooks = s.hooks;
        old.hooksLive = s.hooksLive;
        retired.add(old);
        s.buffer = null;
        s.patch = null;
        s.hooks = null;
    }

    private void freeRetired() {
        if (!inputs.patchWindowOpen(machine)) return;
        long[] pcs = Vcpus.pcs(machine, ArchOptimizer.of(machine.arch()));
        retired.removeIf(s -> {
            for (long pc : pcs) {
                long d = pc - s.buffer.address();
                if (d >= 0 && d < s.bufferBytes) return false;
            }
            release(s);
            return true;
        });
    }

    /** True when one of {@code pcs} (every vCPU's) is inside {@code r} but not at its first byte. */
    private static boolean anyInterior(DisplacedRegion r, long[] pcs) {
        for (long pc : pcs) if (r.interior(pc)) return true;
        return false;
    }

    /**
     * Frees the buffer's slot memory. Its hooks are not deleted while the guest runs: deleting a
     * block hook from Unicorn 2.1.1 between runs broke a booted x86-64 kernel (a double fault soon
     * after an optimized probe was unregistered; measured, see OptimizedKernelProbesTest), so they are
     * made inert and deleted by {@link #close()}. A later buffer at the same address has its own hooks.
     */
    private void release(Site s) {
        if (s.buffer == null) return;
        if (s.hooksLive != null) s.hooksLive.set(false);
        if (s.hooks != null) inertHooks.addAll(s.hooks);
        s.hooks = null;
        machine.invalidateCode(s.buffer.address(), s.bufferBytes);
        engine.freeDetour(s.buffer.address(), s.bufferBytes);
        s.buffer = null;
        s.patch = null;
    }

    /**
     * Adds a hook to every vCPU's engine ({@link Machine#engine(int)}): any vCPU may jump through the
     * site, and a hook fires only in the engine it was added to. vCPUs are added before probes (the
     * boards add them when built); one added later would have no hooks in buffers built before it.
     */
    private List<Placed> inEveryEngine(java.util.function.Function<Unicorn, Unicorn.Hook> add) {
        List<Placed> out = new ArrayList<>(machine.cpuCount());
        for (int c = 0; c < machine.cpuCount(); c++) {
            Unicorn uc = machine.engine(c);
            out.add(new Placed(uc, add.apply(uc)));
        }
        return out;
    }

    private static boolean overlaps(long a, int alen, long b, int blen) {
        return b + blen - a > 0 && a + alen - b > 0;
    }
}
