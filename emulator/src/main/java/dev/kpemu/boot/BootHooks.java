package dev.kpemu.boot;

/**
 * Lets a caller act on a booting guest: before its first instruction, and at host breakpoints
 * it placed ({@link dev.kpemu.machine.Machine#addBreakpoint}), e.g. to register probes once the
 * kernel has finished patching its own text.
 */
public interface BootHooks {
    BootHooks NONE = new BootHooks() {};

    /** The guest is loaded; nothing has run yet. */
    default void ready(LinuxGuest guest) {}

    /** A host breakpoint at {@code address} was reached. Return true to go on booting. */
    default boolean breakpoint(LinuxGuest guest, long address) { return false; }

    /** The boot ended (powered off, failed or timed out); the machine still exists. */
    default void finished(LinuxGuest guest) {}
}
