package dev.kpemu.machine.x86.devices;

/**
 * The APIC bus as an interrupt source sees it: where an {@link IoApic} sends the message of a
 * redirection entry, and where a {@link LocalApic}'s interrupt command goes. {@link ApicBus}, the
 * machine's set of local APICs, implements it. Called from MMIO callbacks and clock events: an
 * implementation only records (sets IRR bits, latches NMI/INIT/SIPI), never runs the CPU.
 */
@FunctionalInterface
public interface ApicDelivery {
    /** Delivery modes (the ICR's bits 10:8 in the SDM, vol. 3, "Interrupt Command Register"; the 82093AA's IOREDTBL bits 10:8). */
    int FIXED = 0, LOWEST_PRIORITY = 1, SMI = 2, NMI = 4, INIT = 5, STARTUP = 6, EXTINT = 7;

    /**
     * Delivers one interrupt message.
     *
     * @param destination  the 8-bit destination field (an APIC ID, 0xff broadcast, or a logical mask)
     * @param logical      logical destination mode (else physical)
     * @param deliveryMode one of the constants above
     * @param vector       the vector (fixed, lowest priority) or start page (STARTUP)
     * @param level        level-triggered (the local APIC then sets TMR and answers EOI with a broadcast)
     */
    void deliver(int destination, boolean logical, int deliveryMode, int vector, boolean level);
}
