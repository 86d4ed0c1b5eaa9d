package dev.kpemu.machine;

/**
 * Gets the first look at breakpoint traps (x86 int3, arm64 BRK) and single-step completions,
 * before the guest's own handler. The kprobes engine implements this.
 */
public interface TrapHandler {
    /**
     * A breakpoint instruction at {@code address} trapped. Return true if the host consumed it
     * (and has set the PC where the guest goes on); false delivers it to the guest's handler.
     */
    boolean onBreakpoint(Machine machine, long address, int immediate);

    /**
     * Whether {@link #onBreakpoint} reads {@code immediate}. A handler that decides by the address
     * alone (the kprobes engine) answers false and is passed -1: arm64 then reads the syndrome,
     * which costs a copy of the whole CPU context, only when the breakpoint goes to the guest.
     */
    default boolean usesBreakpointImmediate() { return true; }

    /**
     * A synchronous exception other than a breakpoint was raised by the instruction at {@code pc}
     * ({@code trapnr}: x86 vector, arm64 ESR exception class). Return true when the host resolved
     * it (nothing is delivered; the guest resumes at the current PC). Before returning false the
     * host may move the PC: the guest then sees that PC as the faulting instruction (kprobes
     * reports a fault of an out-of-line copy at the probed address).
     */
    default boolean onFault(Machine machine, long pc, int trapnr) { return false; }

    /**
     * Which faults {@link #onFault} must see, or null for every one (the default): a machine that
     * delivers faults natively passes to Java only those (see {@link FaultInterest}). A handler that
     * answers must return the same object each time and keep it current.
     */
    default FaultInterest faultInterest() { return null; }

    /** Called by the run loop at every slice boundary: a point where the host may patch guest text. */
    default void onSafePoint(Machine machine) {}
}
