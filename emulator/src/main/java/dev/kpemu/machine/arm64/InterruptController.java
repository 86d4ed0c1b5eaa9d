package dev.kpemu.machine.arm64;

/**
 * What {@link Arm64Machine} needs of its interrupt controller (the GIC): the IRQ signal it
 * drives into the CPU, and its input lines. The machine takes the IRQ exception when the
 * signal is up and PSTATE.I is clear; WFI wakes on the signal whatever PSTATE says.
 */
public interface InterruptController {
    /** The controller's IRQ output to the CPU (before PSTATE.I masking). */
    boolean irqAsserted();

    /** Drives input line {@code intid} (GIC interrupt ID: 16-31 PPIs, 32 and up SPIs). */
    void setLine(int intid, boolean level);
}
