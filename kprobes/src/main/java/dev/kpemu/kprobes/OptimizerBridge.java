package dev.kpemu.kprobes;

import java.lang.System.Logger.Level;
import java.util.function.Function;

/**
 * The engine's side of jump optimization: the attached {@link ProbeOptimizer} (or none: every
 * probe a breakpoint probe) and {@code debug.kprobes_optimization}. Every call is safe without an
 * optimizer and then does what a breakpoint-only engine does.
 */
final class OptimizerBridge {
    private static final System.Logger LOG = System.getLogger("dev.kpemu.kprobes");

    private final ProbeTable table;
    /** Jump optimization, or null (every probe a breakpoint probe). */
    private ProbeOptimizer optimizer;
    /** {@code debug.kprobes_optimization}. */
    private boolean optimizationAllowed = true;

    OptimizerBridge(ProbeTable table) {
        this.table = table;
    }

    /** Attaches the optimizer {@code factory} makes from {@code view}; probes already registered are offered to it. */
    <T extends ProbeOptimizer> T attach(Function<ProbeOptimizer.Engine, T> factory, ProbeOptimizer.Engine view) {
        if (optimizer != null) throw new IllegalStateException("an optimizer is already attached");
        T o = factory.apply(view);
        optimizer = o;
        for (Long a : table.addresses()) o.probeChanged(a);
        return o;
    }

    /** The attached optimizer, or null. */
    ProbeOptimizer optimizer() { return optimizer; }

    /** Sets {@code debug.kprobes_optimization}; every probe is offered again when it changes. */
    void optimization(boolean allow) {
        if (allow == optimizationAllowed) return;
        optimizationAllowed = allow;
        LOG.log(Level.INFO, allow ? "kprobe jump-optimization is enabled. All kprobes are optimized if possible."
                : "kprobe jump-optimization is disabled. All kprobes are based on software breakpoint.");
        for (Long a : table.addresses()) optimizerChanged(a);
    }

    boolean optimizationAllowed() { return optimizationAllowed; }

    /** True when {@code kprobes/list} shows the probe at {@code address} as {@code [OPTIMIZED]}. */
    boolean isOptimized(long address) {
        return optimizer != null && table.points.containsKey(address) && optimizer.listedOptimized(address);
    }

    /** The probe at {@code address} changed (children, enabling, arming). */
    void optimizerChanged(long address) {
        if (optimizer != null) optimizer.probeChanged(address);
    }

    /** Every probe changed (the global arm switch). */
    void allChanged() {
        for (Long a : table.addresses()) optimizerChanged(a);
    }

    /** The engine is about to write guest text over [address, address + length). */
    void beforeTextWrite(long address, int length) {
        if (optimizer != null) optimizer.beforeTextWrite(address, length);
    }

    void probeRemoved(long address) {
        if (optimizer != null) optimizer.probeRemoved(address);
    }

    /** Undoes optimized sites in {@code buf} (guest text at {@code va}). */
    void recoverText(long va, byte[] buf) {
        if (optimizer != null) optimizer.recoverText(va, buf);
    }

    /** Where a breakpoint hit at {@code address} continues instead of stepping, or -1. */
    long detourFor(long address) {
        return optimizer == null ? -1 : optimizer.detourFor(address);
    }

    /** The original address of the displaced instruction whose copy is at {@code pc}, or -1. */
    long originalAddress(long pc) {
        return optimizer == null ? -1 : optimizer.originalAddress(pc);
    }

    /** A safe point with no handler running: pending jumps may be written. */
    void onSafePoint() {
        if (optimizer != null) optimizer.onSafePoint();
    }

    /** Detaches the optimizer (its sites are back to breakpoints or original text). */
    void close() {
        if (optimizer != null) {
            optimizer.close();
            optimizer = null;
        }
    }
}
