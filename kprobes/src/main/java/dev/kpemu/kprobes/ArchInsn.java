package dev.kpemu.kprobes;

/**
 * What to do when a probed instruction is hit, decided once at registration by the arch backend
 * (the kernel's {@code arch_specific_insn}): run a copy from a slot, or simulate it in Java.
 */
public interface ArchInsn {
    /** Length of the probed instruction in bytes. */
    int length();

    /** True when a copy runs from a slot; false when the backend simulates it ({@link ArchKprobes#simulate}). */
    boolean outOfLine();

    /** True when the slot may end with a jump back instead of a trap (Linux's boosting). */
    boolean boostable();
}
