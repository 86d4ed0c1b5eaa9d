package dev.kpemu.machine.x86.devices;

/** One interrupt request line from a device to an interrupt controller input. */
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
