package dev.kpemu.kprobes;


import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;

/**
 * The arch half of the engine, as Linux splits {@code kernel/kprobes.c} from
 * {@code arch/*}{@code /kernel/probes}: decoding at registration (its {@link ProbeDecoder}), slot contents, simulation, the
 * return-address swap of kretprobes, the frame walk and the page-table entries of the slot area.
 */
public interface ArchKprobes extends ProbeDecoder {

    /** The breakpoint written over a probed instruction (x86 {@code int3}, arm64 {@code BRK #4}). */
    byte[] breakpoint();

    /**
     * The ip a breakpoint hit at {@code address} shows the handlers: x86 after the {@code int3}
     * (the trap's saved ip), arm64 at the {@code BRK} (ELR points at it).
     */
    long trapIp(long address);

    /**
     * The trap number a fault handler is given for a handler's bad memory access: x86 14 (#PF),
     * arm64 the ESR exception class of a data abort at the same level (0x25).
     */
    int memoryFaultTrap();

    /** Bytes {@link #prepare} needs at the probe address (x86 16, arm64 4). */
    int maxInstructionLength();

    /**
     * The slot's bytes for an out-of-line copy at {@code slot}: the (fixed-up) copy followed by a
     * trap, or by a jump back to {@code address + length} when {@code boost}. Throws EINVAL when
     * the copy cannot be relocated there.
     */
    byte[] slotCode(ArchInsn insn, long address, long slot, boolean boost);

    /** True when a boosted slot at {@code slot} can jump back to the instruction after {@code address}. */
    boolean canBoost(ArchInsn insn, long address, long slot);

    /** Offset inside the slot of the trap that ends a step (x86 the int3 after the copy, arm64 the BRK #6). */
    int stepTrapOffset(ArchInsn insn);

    /** Runs a simulated instruction probed at {@code address} on the trapped registers. */
    void simulate(ArchInsn insn, long address, Regs regs);

    /** The kretprobe trampoline's code (x86 {@code int3}, arm64 {@code BRK #7}). */
    byte[] trampolineCode();

    /** The register view of the machine. */
    LiveRegs regs();

    /**
     * The registers a hit recorded by the machine's native code captures ({@link RecordedHits}),
     * by {@link Regs#get} name; null: the arch records no hits natively.
     */
    default String[] recordedRegisters() { return null; }

    /**
     * The probe points whose hits the machine's native code records: {@link Regs.Entry#FTRACE}
     * ftrace sites (x86-64, where the recorded registers are the ftrace view's) or
     * {@link Regs.Entry#BREAKPOINT} breakpoints (arm64, which has no kprobes on ftrace).
     */
    default Regs.Entry recordedEntry() { return Regs.Entry.FTRACE; }

    /**
     * Where a natively recorded entry finds the return address a kretprobe swaps for its
     * trampoline ({@link #swapReturnAddress}); null: kretprobe entries stay on the Java path.
     */
    default ReturnSlot recordedReturnSlot() { return null; }

    /**
     * The return address at a recorded entry: in the recorded register {@code register} itself
     * ({@code inRegister}: arm64 x30) or in memory at its value + {@code offset} (x86-64
     * {@code [rsp]}); {@code frameRegister} is the recorded register whose value is the entry's
     * frame key ({@link #entryFrame}), and its value + {@code returnFrameOffset} at the
     * trampoline's breakpoint the return's ({@link #returnFrame}: x86-64 the slot {@code ret} popped).
     */
    record ReturnSlot(String register, long offset, boolean inRegister, String frameRegister, long returnFrameOffset) { }

    /**
     * At a function's entry: replaces where it will return (x86 {@code [rsp]}, arm64 {@code lr})
     * with {@code trampoline} and returns the real return address ({@code arch_prepare_kretprobe}).
     */
    long swapReturnAddress(Regs regs, long trampoline);

    /**
     * At a function's entry, makes it return {@code retval} to its caller without running its
     * body ({@code override_function_with_return}, arch/*{@code /lib/error-inject.c}): x86 sets
     * rax and pops the return address into rip (sp += 8); arm64 sets x0 and pc = lr. The pre
     * handler that calls it returns non-zero so the probed instruction is not stepped.
     */
    void overrideFunctionWithReturn(Regs regs, long retval);

    /** At a function's entry: where it will return (x86 {@code [sp]}, arm64 {@code lr}). */
    long returnAddressAtEntry(Regs regs);

    /** The frame key saved at entry (x86 the return address's stack slot, arm64 the caller's x29). */
    long entryFrame(Regs regs);

    /** The same key seen at the trampoline after the function returned. */
    long returnFrame(Regs regs);

    /** One step of a frame-pointer walk: the return address and the frame key it belongs to. */
    @FunctionalInterface
    interface FrameVisitor { boolean visit(long returnAddress, long frameKey); }

    /** Walks the frame-pointer chain from {@code regs} (not including the ip itself). */
    void walkFrames(Regs regs, FrameVisitor visitor);


}
