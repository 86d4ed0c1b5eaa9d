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
}
