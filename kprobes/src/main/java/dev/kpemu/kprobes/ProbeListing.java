package dev.kpemu.kprobes;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** The debugfs {@code kprobes/list} file ({@code show_kprobe_addr}), in the kernel's hash order. */
final class ProbeListing {
    /** {@code KPROBE_HASH_BITS}: kprobes/list is ordered by this hash, as the kernel's is. */
    private static final int HASH_BITS = 6;

    private final Map<Long, ProbePoint> points;
    private final OptimizerBridge optimizers;

    ProbeListing(ProbeTable table, OptimizerBridge optimizers) {
        this.points = table.points;
        this.optimizers = optimizers;
    }

    /** The listing, in the kernel's order (hash bucket, then newest first). */
    String list() {
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
                if (optimizers.isOptimized(p.address)) sb.append("[OPTIMIZED]");
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
}
