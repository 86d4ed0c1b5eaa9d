package dev.kpemu.machine.x86.devices;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.function.IntConsumer;

/**
 * The machine's local APICs as one set: it routes the I/O APIC's messages ({@link ApicDelivery})
 * and the interprocessor interrupts a {@link LocalApic}'s ICR sends to the APICs they name, and
 * carries a local APIC's EOI broadcast for a level-triggered vector to the I/O APIC
 * ({@link #onEoiBroadcast}). Destinations: physical (an APIC ID, 0xff all) or logical (each APIC's
 * LDR in its DFR's flat or cluster model); an APIC disabled in IA32_APIC_BASE receives nothing.
 * Lowest-priority delivery goes to one APIC of the set, the one with the lowest APIC ID (no
 * arbitration, as QEMU); SMI and ExtINT messages are dropped. Holds no state of its own (the
 * APICs' state is theirs), so it is not {@link dev.kpemu.machine.Stateful}.
 */
public final class ApicBus implements ApicDelivery {
    private final List<LocalApic> apics = new ArrayList<>();
    private final List<IntConsumer> eoiListeners = new ArrayList<>();

    /** Called by {@link LocalApic}'s constructor. */
    void attach(LocalApic apic) {
        for (LocalApic a : apics) {
            if (a.apicId() == apic.apicId()) throw new IllegalArgumentException("APIC ID " + apic.apicId() + " taken");
        }
        apics.add(apic);
    }

    public List<LocalApic> apics() { return Collections.unmodifiableList(apics); }

    /** Hears every EOI broadcast (the vector): the I/O APIC's {@link IoApic#endOfInterrupt}. */
    public void onEoiBroadcast(IntConsumer listener) { eoiListeners.add(listener); }

    void eoiBroadcast(int vector) {
        for (IntConsumer l : eoiListeners) l.accept(vector);
    }

    @Override
    public void deliver(int destination, boolean logical, int deliveryMode, int vector, boolean level) {
        List<LocalApic> targets = new ArrayList<>();
        for (LocalApic a : apics) {
            if (a.hardwareEnabled() && (logical ? a.matchesLogical(destination) : a.matchesPhysical(destination))) targets.add(a);
        }
        deliverTo(targets, deliveryMode, vector, level);
    }

    /** A message from {@code from}'s ICR (low word {@code icrLow}, destination field {@code dest}). */
    void sendIpi(LocalApic from, int icrLow, int dest) {
        int mode = icrLow >> 8 & 7, vector = icrLow & 0xff;
        boolean level = (icrLow & LocalApic.ICR_LEVEL_TRIGGER) != 0;
        if (mode == INIT && level && (icrLow & LocalApic.ICR_LEVEL_ASSERT) == 0) return; // INIT level de-assert
        int shorthand = icrLow >> LocalApic.ICR_SHORTHAND_SHIFT & 3;
        if (shorthand == LocalApic.SHORTHAND_NONE) {
            deliver(dest, (icrLow & LocalApic.ICR_DEST_LOGICAL) != 0, mode, vector, level);
            return;
        }
        List<LocalApic> targets = new ArrayList<>();
        for (LocalApic a : apics) {
            boolean self = a == from;
            boolean named = switch (shorthand) {
                case LocalApic.SHORTHAND_SELF -> self;
                case LocalApic.SHORTHAND_ALL -> true;
                default -> !self;
            };
            if (named && a.hardwareEnabled()) targets.add(a);
        }
        deliverTo(targets, mode, vector, level);
    }

    private static void deliverTo(List<LocalApic> targets, int mode, int vector, boolean level) {
        switch (mode) {
            case FIXED -> { for (LocalApic a : targets) a.acceptFixed(vector, level); }
            case LOWEST_PRIORITY -> {
                LocalApic lowest = null;
                for (LocalApic a : targets) if (lowest == null || a.apicId() < lowest.apicId()) lowest = a;
                if (lowest != null) lowest.acceptFixed(vector, level);
            }
            case NMI -> { for (LocalApic a : targets) a.acceptNmi(); }
            case INIT -> { for (LocalApic a : targets) a.acceptInit(); }
            case STARTUP -> { for (LocalApic a : targets) a.acceptStartup(vector); }
            default -> { } // SMI, ExtINT, reserved: not modelled
        }
    }
}
