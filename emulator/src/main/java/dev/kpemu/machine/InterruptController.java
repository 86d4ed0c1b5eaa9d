package dev.kpemu.machine;

/**
 * The interrupt controller in front of the CPU's interrupt input: devices drive its input lines,
 * it asserts the CPU's interrupt signal (x86 INTR, arm64 IRQ) while an enabled, unmasked input
 * is pending, and the interrupt acknowledge hands that input over and marks it in service. x86:
 * the 8259 pair, acknowledged by the CPU's INTA cycle, which gives the vector the machine
 * delivers; arm64: the GICv2, acknowledged by the guest reading GICC_IAR, the CPU taking the
 * IRQ exception at its fixed vector. The machine takes the interrupt when the signal is up and
 * the CPU does not mask it (RFLAGS.IF, PSTATE.I); an arm64 WFI wakes on the signal even masked.
 */
public interface InterruptController {
    /** Drives input line {@code line} (8259: ISA IRQ 0-15; GIC: interrupt ID, PPIs 16-31, SPIs from 32). */
    void setLine(int line, boolean level);

    /** True while the controller's output to the CPU is asserted (before the CPU's own masking). */
    boolean interruptAsserted();

    /**
     * The interrupt acknowledge: the highest-priority pending input becomes in service; returns
     * what the CPU or guest reads (8259: the vector, from its ICW2 base; GIC: the interrupt ID),
     * or the controller's spurious answer when nothing is pending.
     */
    int acknowledge();

    /** Input line {@code line} as a device's {@link IrqLine}. */
    default IrqLine line(int line) { return level -> setLine(line, level); }
}
