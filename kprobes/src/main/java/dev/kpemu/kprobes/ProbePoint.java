package dev.kpemu.kprobes;

import java.util.ArrayList;
import java.util.List;

/**
 * Everything registered at one address (the kernel's hash entry: a probe, or an aggregator
 * holding several): the children newest first, the decoded instruction, the original bytes under
 * the breakpoint, the slot and whether the breakpoint is in guest memory.
 */
final class ProbePoint {
    final long address;
    final SymbolResolver.SymbolInfo symbol;
    /** Children, newest first (handlers run in this order). */
    final List<Kprobe> children = new ArrayList<>(2);
    /** Guest-physical address of the probe (the text watch works on physical addresses). */
    final long physical;
    final long sequence;
    ArchInsn insn;
    /** Original bytes under the breakpoint. */
    byte[] saved;
    /** Slot address, or 0 when the instruction is simulated. */
    long slot;
    boolean boosted;
    /** The breakpoint is in guest memory. */
    boolean armed;
    /** On an ftrace call site: Linux arms it through ftrace ({@code KPROBE_FLAG_FTRACE}, listed {@code [FTRACE]}). */
    boolean ftrace;
    /** The guest wrote to the instruction; re-read and re-decode before use. */
    boolean textChanged;
    /** Per breakpoint byte: the guest overwrote it (so memory holds the new original). */
    boolean[] overwritten;
    /** The guest rewrote the instruction into one that cannot be probed: stays disarmed until it changes again. */
    boolean unprobeable;
    /** Asks the engine's optimizer whether {@code kprobes/list} shows this point {@code [OPTIMIZED]}. */
    java.util.function.BooleanSupplier listedOptimized = () -> false;
    /** The text was freed ({@code kill_kprobe}): never armed again, its probes are {@code [GONE]}. */
    boolean gone;

    ProbePoint(long address, SymbolResolver.SymbolInfo symbol, long physical, long sequence) {
        this.address = address;
        this.symbol = symbol;
        this.physical = physical;
        this.sequence = sequence;
    }

    boolean anyEnabled() {
        for (Kprobe k : children) if (!k.isDisabled()) return true;
        return false;
    }

    /**
     * Whether a hit on this ftrace site writes the ftrace call's return address below the stack
     * pointer: when any enabled child's handlers may read guest memory (a kretprobe's entry
     * probe always may).
     */
    boolean needsCallFrame() {
        for (int i = 0; i < children.size(); i++) {       // indexed: no iterator object per hit
            Kprobe k = children.get(i);
            if (!k.isDisabled() && (!k.readsNoMemory || k.owner != null)) return true;
        }
        return false;
    }

    boolean hasPostHandler() {
        for (Kprobe k : children) if (k.postHandler() != null) return true;
        return false;
    }

    /** {@code kprobes_inc_nmissed_count}: every child's counter. */
    void missed() {
        for (Kprobe k : children) k.nmissed++;
    }

    /** Address of the trap ending a step from the slot. */
    long stepTrap(ArchKprobes arch) {
        return slot == 0 ? 0 : slot + arch.stepTrapOffset(insn);
    }

    boolean slotContains(long va) {
        return slot != 0 && Long.compareUnsigned(va - slot, SlotArea.SLOT_SIZE) < 0;
    }

    /** Bytes covered by the instruction: [address, address + length). */
    long end() {
        return address + (insn == null ? saved.length : insn.length());
    }
}
