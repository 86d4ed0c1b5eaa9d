package dev.kpemu.kprobes;

import dev.kpemu.unicorn.Unicorn;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.function.ToIntFunction;

/**
 * {@link Regs#getAll} for an arch's {@link Regs}: one engine batch per caller's array of names
 * (the event engine keeps one), so a hit reads its registers in one call. A batch's native memory
 * lives as long as the engine.
 */
public final class RegisterBatches {
    private final Unicorn uc;
    private final ToIntFunction<String> engineId;
    private final Map<String[], Unicorn.RegisterBatch> batches = new IdentityHashMap<>();

    /** {@code engineId}: the arch's Unicorn register id for a register name. */
    public RegisterBatches(Unicorn uc, ToIntFunction<String> engineId) {
        this.uc = uc;
        this.engineId = engineId;
    }

    /** Reads the registers {@code names} into {@code out}, in order. */
    public void read(String[] names, long[] out) {
        batches.computeIfAbsent(names, n -> {
            int[] ids = new int[n.length];
            for (int i = 0; i < n.length; i++) ids[i] = engineId.applyAsInt(n[i]);
            return uc.registerBatch(ids);
        }).read(out);
    }
}
