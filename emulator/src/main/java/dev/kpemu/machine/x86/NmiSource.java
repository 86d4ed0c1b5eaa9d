package dev.kpemu.machine.x86;

/**
 * What latches the x86 CPU's NMI input besides its interrupt controller's INTR: on the APIC
 * board the local APIC (LINT1 in NMI mode, NMI messages). {@link X86Machine} takes a pending NMI
 * at a slice boundary whatever RFLAGS.IF says and delivers vector 2 through the IDT.
 */
public interface NmiSource {
    /** True while an NMI waits for the CPU. */
    boolean nmiPending();

    /** The CPU takes the pending NMI; returns whether there was one. */
    boolean takeNmi();
}
