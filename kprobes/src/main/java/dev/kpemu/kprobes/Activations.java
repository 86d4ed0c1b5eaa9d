package dev.kpemu.kprobes;

import java.util.ArrayDeque;

import dev.kpemu.machine.Machine;

/**
 * The kernel's per-CPU kprobe control block: {@code current_kprobe} and {@code kprobe_status}
 * (current plus the saved previous level on reentry) — which probe's handlers or step are
 * running on a CPU — one per vCPU, indexed by {@link Machine#cpu()}, the vCPU whose hook is
 * running. So a hit on one vCPU while another is between the start and the end of its
 * out-of-line step (a quantum can end there: the step's slot is a block of its own) is an
 * ordinary hit, and only a hit on the same vCPU is reentry ({@code kprobe_running()}).
 *
 * <p>Interrupts are held while any vCPU has a step in flight: the machine's hold is machine-wide
 * ({@link Machine#holdInterrupts}), so one vCPU's finished step must not release another's.
 * With one vCPU everything is as before: one block, the same hold.
 */
final class Activations {
    /** The kernel's per-CPU kprobe status values. */
    enum Status { HIT_ACTIVE, HIT_SS, REENTER, HIT_SSDONE }

    /** One level of {@code current_kprobe} (the kernel keeps current + one saved previous). */
    static final class Activation {
        final ProbePoint point;
        Status status;

        Activation(ProbePoint point, Status status) {
            this.point = point;
            this.status = status;
        }
    }

    private final Machine machine;
    /** vCPU i's levels, innermost first; grown when a vCPU added later first hits. */
    private ArrayDeque<Activation>[] perCpu;

    @SuppressWarnings("unchecked")
    Activations(Machine machine) {
        this.machine = machine;
        this.perCpu = new ArrayDeque[] {new ArrayDeque<Activation>()};
    }

    /** The hitting vCPU's levels. */
    private ArrayDeque<Activation> mine() {
        int cpu = machine.cpu();
        if (cpu >= perCpu.length) grow(cpu);
        return perCpu[cpu];
    }

    private void grow(int cpu) {
        int old = perCpu.length;
        perCpu = java.util.Arrays.copyOf(perCpu, Math.max(cpu + 1, machine.cpuCount()));
        for (int i = old; i < perCpu.length; i++) perCpu[i] = new ArrayDeque<>();
    }

    /** {@code kprobe_running()} on the hitting vCPU: false when no handler or step is active there. */
    boolean isEmpty() { return mine().isEmpty(); }

    /** True when no vCPU runs a handler or has a step in flight (a safe point for every vCPU). */
    boolean noneActive() {
        for (ArrayDeque<Activation> a : perCpu) if (!a.isEmpty()) return false;
        return true;
    }

    /** The hitting vCPU's innermost level, or null. */
    Activation peek() { return mine().peek(); }

    /** A new innermost level on the hitting vCPU. */
    void push(Activation a) {
        mine().push(a);
        busy(true);
    }

    /** The machine's native code records no hit while one of the engine's is in flight ({@link RecordedHits}). */
    private void busy(boolean busy) {
        var h = machine.recordedProbeHits();
        if (h != null) h.setBusy(busy);
    }

    /** Ends level {@code a} of the hitting vCPU; interrupts stay held while any vCPU's step is still in flight. */
    void pop(Activation a) {
        mine().remove(a);
        busy(!mine().isEmpty());
        boolean stepping = false;
        for (ArrayDeque<Activation> levels : perCpu) {
            if (levels.isEmpty()) continue;             // the common case: no iterator object per hit
            for (Activation x : levels) stepping |= x.status == Status.HIT_SS || x.status == Status.REENTER;
        }
        machine.holdInterrupts(stepping);
    }

    /** True when some level of some vCPU is {@code p}'s (its slot may still be executing there). */
    boolean involves(ProbePoint p) {
        for (ArrayDeque<Activation> levels : perCpu)
            for (Activation a : levels) if (a.point == p) return true;
        return false;
    }
}
