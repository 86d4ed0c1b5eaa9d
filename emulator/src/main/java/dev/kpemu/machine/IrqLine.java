package dev.kpemu.machine;

/**
 * One interrupt request line from a device's output to an interrupt controller's input (QEMU's
 * {@code qemu_irq}): the 8254 PIT's OUT0 and the 16550s into the 8259 pair, the PL011s and the
 * generic timer into the GIC. A device is given its line ({@link InterruptController#line}) and
 * only ever sets its level.
 */
@FunctionalInterface
public interface IrqLine {
    void set(boolean level);

    /** A line connected to nothing. */
    IrqLine NONE = level -> {};

    /** An edge: raise then lower (the PIT output as the edge-triggered 8259 sees it). */
    default void pulse() {
        set(true);
        set(false);
    }
}
