package dev.kpemu.kprobes;

import dev.kpemu.machine.Machine;
import dev.kpemu.unicorn.Unicorn;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.function.ToIntFunction;

/**
 * {@link Regs#getAll} for an arch's {@link Regs}: one engine batch per caller's array of names
 * (the event engine keeps one) and per vCPU's engine (the current one, {@link Machine#engine()}),
 * so a hit reads its registers in one call. A batch's native memory lives as long as the engine.
 */
public final class RegisterBatches {
    private final Machine machine;
    private final ToIntFunction<String> engineId;
    private final Map<Unicorn, Map<String[], Unicorn.RegisterBatch>> byEngine = new IdentityHashMap<>();
    /** The last engine asked for and its batches (one vCPU: always these). */
    private Unicorn lastEngine;
    private Map<String[], Unicorn.RegisterBatch> batches;

    /** {@code engineId}: the arch's Unicorn register id for a register name. */
    public RegisterBatches(Machine machine, ToIntFunction<String> engineId) {
        this.machine = machine;
        this.engineId = engineId;
    }

    /** Reads the current vCPU's registers {@code names} into {@code out}, in order. */
    public void read(String[] names, long[] out) {
        Unicorn uc = machine.engine();
        if (uc != lastEngine) {
            batches = byEngine.computeIfAbsent(uc, e -> new IdentityHashMap<>());
            lastEngine = uc;
        }
        batches.computeIfAbsent(names, n -> {
            int[] ids = new int[n.length];
            for (int i = 0; i < n.length; i++) ids[i] = engineId.applyAsInt(n[i]);
            return uc.registerBatch(ids);
        }).read(out);
    }
}
