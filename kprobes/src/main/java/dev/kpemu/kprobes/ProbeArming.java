package dev.kpemu.kprobes;

import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;

import dev.kpemu.machine.FaultInterest;
import dev.kpemu.machine.Machine;

/**
 * Arming and text coherence: preparing a point (decode, saved bytes, slot), boosting, writing
 * and removing breakpoints ({@code arm_kprobe} / {@code disarm_kprobe}), the global arm switch,
 * the original text under breakpoints ({@code recover_probed_instruction}) and keeping saved
 * bytes, decode and slot in step with guest writes to probed text ({@link TextWatch}).
 */
final class ProbeArming {
    private static final System.Logger LOG = System.getLogger("dev.kpemu.kprobes");

    private final Machine machine;
    private final ArchKprobes arch;
    private final SlotArea slots;
    private final ProbeTable table;
    private final Map<Long, ProbePoint> points;
    private final NavigableMap<Long, ProbePoint> byAddress;
    private final Map<Long, ProbePoint> stepTraps;
    private final Activations active;
    private final OptimizerBridge optimizers;
    private final Set<ProbePoint> textChanged = Collections.newSetFromMap(new IdentityHashMap<>());
    private final TextWatch textWatch;
    /** Every fault goes to the engine ({@link HitPath#onFault} syncs first) while {@link #textChanged} is not empty. */
    private final FaultInterest faults;
    private boolean watchText = true;
    private boolean allArmed = true;
    private boolean boosting = true;

    ProbeArming(Machine machine, ArchKprobes arch, SlotArea slots, ProbeTable table, Activations active, OptimizerBridge optimizers,
            FaultInterest faults) {
        this.machine = machine;
        this.faults = faults;
        this.arch = arch;
        this.slots = slots;
        this.table = table;
        this.points = table.points;
        this.byAddress = table.byAddress;
        this.stepTraps = table.stepTraps;
        this.active = active;
        this.optimizers = optimizers;
        this.textWatch = new TextWatch(machine, this::onTextWrite);
    }

    // ------------------------------------------------------------------ switches

    /** Keeps saved original bytes in step with guest writes to probed text (see {@link Kprobes#watchText}). */
    void watchText(boolean watch) {
        if (watch == watchText) return;
        this.watchText = watch;
        for (ProbePoint p : points.values()) {
            if (watch) textWatch.watch(p, p.insn.length()); else textWatch.unwatch(p);
        }
    }

    /** Starts watching a new point's text (when watching is on). */
    void watch(ProbePoint point) {
        if (watchText) textWatch.watch(point, point.insn.length());
    }

    /** Stops watching a point's text (its text is gone). */
    void unwatch(ProbePoint p) {
        if (watchText) textWatch.unwatch(p);
    }

    /** Boosting on or off (see {@link Kprobes#boosting}). */
    void boosting(boolean on) {
        this.boosting = on;
        for (ProbePoint p : points.values()) refreshSlot(p);
    }

    /** debugfs {@code kprobes/enabled} = 1. */
    void armAll() {
        syncText();
        allArmed = true;
        for (ProbePoint p : points.values()) updateArming(p);
        optimizers.allChanged();
    }

    /** debugfs {@code kprobes/enabled} = 0. */
    void disarmAll() {
        allArmed = false;
        for (ProbePoint p : points.values()) updateArming(p);
        optimizers.allChanged();
    }

    boolean allArmed() { return allArmed; }

    // ------------------------------------------------------------------ preparation and arming

    ProbePoint preparePoint(long addr, SymbolResolver.SymbolInfo sym) {
        long physical;
        try {
            physical = machine.translateOrThrow(addr).physical();
        } catch (Machine.GuestMemoryException e) {
            throw new KprobeException(Errno.EINVAL, String.format("0x%x is not mapped", addr));
        }
        ArchInsn insn = arch.prepare(addr, this::originalText, sym);
        ProbePoint p = new ProbePoint(addr, sym, physical, table.nextSequence());
        p.listedOptimized = () -> optimizers.isOptimized(addr);
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

    void ensureSlotsMapped() {
        if (slots.mappedIn(machine)) return;
        slots.map(machine);
    }

    /** Boosting: a slot ending in a jump back when the instruction allows it and no child has a post handler. */
    void refreshSlot(ProbePoint p) {
        if (p.slot == 0) return;
        boolean boost = boosting && p.insn.boostable() && !p.hasPostHandler() && arch.canBoost(p.insn, p.address, p.slot);
        if (boost == p.boosted) return;
        onChange.run();
        slots.write(machine, p.slot, arch.slotCode(p.insn, p.address, p.slot, boost));
        p.boosted = boost;
    }

    void updateArming(ProbePoint p) {
        onChange.run();
        if (watchText) {
            // a guest write to this text that has not run yet is adopted before the engine writes here
            textWatch.settle(p);
            if (p.textChanged) {
                textChanged.remove(p);
                faults.seeAll(!textChanged.isEmpty());
                refreshChangedText(p); // ends in updateArming
                return;
            }
        }
        boolean want = allArmed && p.anyEnabled() && !p.unprobeable && !p.gone;
        if (want != p.armed) optimizers.beforeTextWrite(p.address, p.saved.length);
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

    private Runnable onChange = () -> { };

    /** Told of every change of a point's arming, slot or boosting (a recorded hit's site depends on them). */
    void onChange(Runnable r) { this.onChange = r; }

    void removePoint(ProbePoint p) {
        onChange.run();
        p.children.clear();
        updateArming(p);
        points.remove(p.address);
        table.atAddress.remove(p.address);
        byAddress.remove(p.address);
        if (p.slot != 0) {
            stepTraps.remove(p.stepTrap(arch));
            boolean stepping = active.involves(p);
            if (!stepping) slots.free(p.slot);
        }
        if (watchText) textWatch.unwatch(p);
        textChanged.remove(p);
        faults.seeAll(!textChanged.isEmpty());
        optimizers.probeRemoved(p.address);
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
        optimizers.recoverText(va, b);
        return b;
    }

    /** True when guest memory at {@code address} holds the breakpoint. */
    boolean isBreakpointAt(long address) {
        try {
            return java.util.Arrays.equals(machine.readVirtual(address, arch.breakpoint().length), arch.breakpoint());
        } catch (Machine.GuestMemoryException e) {
            return false;
        }
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
        faults.seeAll(true);
    }

    /**
     * Applies recorded guest writes to probed text: the new original bytes are kept, the
     * instruction re-decoded and the slot rewritten, and the breakpoint re-armed if the guest
     * overwrote it. Runs at every trap and slice boundary; callable any time.
     */
    void syncText() {
        if (textChanged.isEmpty()) return;
        for (ProbePoint p : new ArrayList<>(textChanged)) refreshChangedText(p);
        textChanged.clear();
        faults.seeAll(false);
    }

    private void refreshChangedText(ProbePoint p) {
        if (!p.textChanged) return;
        p.textChanged = false;
        onChange.run();
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
}
