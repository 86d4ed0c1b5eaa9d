package dev.kpemu.machine;

/**
 * The guest's own hardware data watchpoints (x86 DR0–DR3/DR7, arm64 DBGWVRn/DBGWCRn), emulated on {@link Watchpoints}
 * because Unicorn 2.1.4 stores those registers but never fires them
 * ({@code WatchMechanismFactsTest.theGuestsOwnDataWatchpointsDoNotFire}). Each enabled slot of a
 * vCPU is a watch of its own, independent of kpemu's watches on the same bytes (both see every
 * access); a hit becomes the debug exception the hardware would raise, on the vCPU whose slot it
 * is. Per arch: {@code X86DebugRegisters} (a trap after the access), {@code Arm64DebugRegisters}
 * (an exception before it).
 */
public interface GuestDebugRegisters {
    /**
     * Re-reads the current vCPU's debug registers from its engine and makes its slots' watches
     * follow them (idempotent: unchanged slots keep their watches). Called by the host at the
     * instruction after each guest write of a debug register, at a safe point of the run loop.
     */
    void sync();

    /** The slots armed now, over every vCPU. */
    int armedSlots();

    /** The debug exceptions delivered to the guest for its slots so far. */
    long exceptionsDelivered();
}
