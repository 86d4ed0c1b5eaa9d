package dev.kpemu.kprobes;

import java.util.List;
import java.util.Map;
import java.util.NavigableMap;

import dev.kpemu.machine.Machine;

/** The engine as an attached {@link ProbeOptimizer} sees it ({@link ProbeOptimizer.Engine}). */
final class OptimizerView implements ProbeOptimizer.Engine {
    private final Machine machine;
    private final ArchKprobes arch;
    private final Regs regs;
    private final SymbolResolver symbols;
    private final SlotArea slots;
    private final Map<Long, ProbePoint> points;
    private final NavigableMap<Long, ProbePoint> byAddress;
    private final ProbeArming arming;
    private final OptimizerBridge optimizers;
    private final HitPath hits;
    private final RecordedHits recorded;

    OptimizerView(Machine machine, ArchKprobes arch, SymbolResolver symbols, SlotArea slots, ProbeTable table,
                  ProbeArming arming, OptimizerBridge optimizers, HitPath hits, RecordedHits recorded) {
        this.machine = machine;
        this.arch = arch;
        this.regs = arch.regs();
        this.symbols = symbols;
        this.slots = slots;
        this.points = table.points;
        this.byAddress = table.byAddress;
        this.arming = arming;
        this.optimizers = optimizers;
        this.hits = hits;
        this.recorded = recorded;
    }

    @Override public void detourChanged(long address) { recorded.changed(); }

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

    @Override public boolean optimizationAllowed() { return optimizers.optimizationAllowed(); }

    @Override public byte[] originalText(long va, int len) { return arming.originalText(va, len); }

    @Override
    public long allocateDetour(int bytes, long near, long reach) {
        arming.ensureSlotsMapped();
        return slots.allocate(bytes, near, reach);
    }

    @Override public void writeDetour(long va, byte[] code) { slots.write(machine, va, code); }

    @Override public void freeDetour(long va, int bytes) { slots.free(va, bytes); }

    @Override public void optimizedHit(long address) { hits.optimizedHit(address); }

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
            insn = arch.prepare(address, arming::originalText, sym);
        }
        if (insn.outOfLine()) throw new IllegalStateException(String.format("the instruction at 0x%x is not simulated", address));
        arch.simulate(insn, address, regs);
    }
}
