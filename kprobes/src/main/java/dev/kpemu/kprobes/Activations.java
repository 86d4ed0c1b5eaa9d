package dev.kpemu.kprobes;

import java.util.ArrayDeque;

import dev.kpemu.machine.Machine;

/**
 * The kernel's per-CPU {@code current_kprobe} and {@code kprobe_status} (current plus the saved
 * previous level on reentry): which probe's handlers or step are running, and whether the
 * machine holds interrupts because a step from a slot is in flight.
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
    private final ArrayDeque<Activation> active = new ArrayDeque<>();

    Activations(Machine machine) {
        this.machine = machine;
    }

    /** {@code kprobe_running()}: false when no handler or step is active. */
    boolean isEmpty() { return active.isEmpty(); }

    /** The innermost level, or null. */
    Activation peek() { return active.peek(); }

    void push(Activation a) { active.push(a); }

    /** Ends level {@code a}; interrupts stay held while a step is still in flight. */
    void pop(Activation a) {
        active.remove(a);
        boolean stepping = false;
        for (Activation x : active) stepping |= x.status == Status.HIT_SS || x.status == Status.REENTER;
        machine.holdInterrupts(stepping);
    }

    /** True when some level is {@code p}'s (its slot may still be executing). */
    boolean involves(ProbePoint p) {
        boolean stepping = false;
        for (Activation a : active) stepping |= a.point == p;
        return stepping;
    }
}
