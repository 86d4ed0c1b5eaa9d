package dev.kpemu.machine;

/**
 * Which guest faults a {@link TrapHandler}'s {@link TrapHandler#onFault} must see, so that an arch
 * machine whose native hooks deliver faults without the Java path (x86 {@code kpemu_x86_exception.c},
 * arm64 {@code kpemu_arm64_svc.c}) passes only those to Java: every fault while {@link #seesAll}
 * is set, and a fault whose pc lies in {@code [pcLow, pcHigh)}. A handler that gives none (the
 * default) sees every fault. The kprobes engine owns the faults of its slot area (single steps,
 * boosted copies, detours, the area unmapped by the guest's tables) and sees every fault while
 * guest writes to probed text wait to be synced (its {@code onFault} syncs them first). Changes
 * reach the native hooks at once (the machine listens).
 */
public final class FaultInterest {
    private long pcLow, pcHigh;
    private boolean seesAll;
    private Runnable listener = () -> {};

    /** Faults whose pc is in {@code [low, high)} are the handler's (unsigned; empty when low == high). */
    public void ownPcs(long low, long high) {
        if (low == pcLow && high == pcHigh) return;
        pcLow = low;
        pcHigh = high;
        listener.run();
    }

    /** While set, every fault is the handler's. */
    public void seeAll(boolean all) {
        if (all == seesAll) return;
        seesAll = all;
        listener.run();
    }

    public long pcLow() { return pcLow; }

    public long pcHigh() { return pcHigh; }

    public boolean seesAll() { return seesAll; }

    void listen(Runnable r) { listener = r == null ? () -> {} : r; }
}
