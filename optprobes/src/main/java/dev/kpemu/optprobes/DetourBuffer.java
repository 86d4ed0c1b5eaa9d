package dev.kpemu.optprobes;

import dev.kpemu.machine.Arch;
import java.util.OptionalLong;

/**
 * The code of one detour buffer, built for a given buffer address: what the probe-site jump leads
 * to. Layout ({@link Style#FRAME}, the default, modelled on Linux's {@code optprobe_template_*}):
 * <pre>
 *   address:              save the registers into a pt_regs frame on the stack ("as a trap would")
 *   handOffAddress:       one instruction (a NOP) where the engine places a code hook; at that point
 *                         the stack pointer points at the frame ({@link X86PtRegs} / {@link Arm64PtRegs})
 *                         and the handlers run on the host; they may change frame slots
 *                         restore the registers from the frame, drop it
 *   displacedCodeAddress: the displaced instructions, relocated (Linux's TMPL_END_IDX)
 *                         [arm64, simulated instruction: simulateAddress, a NOP hand-off]
 *                         jump back to returnAddress = probe address + region length
 * </pre>
 * {@link Style#LIVE_REGISTERS} drops the frame: the hand-off is the first instruction and the handler
 * reads and writes the live registers (cheaper when handlers touch few registers; measured in the tests).
 *
 * <p>Engine contract. Add the code hooks on {@code handOffAddress} (and {@code simulateAddress}) before
 * the buffer first runs, or drop the translation cache for the buffer after adding them (hooks added
 * after translation may not fire). A breakpoint hit on a probe that is being optimized or
 * unoptimized continues at {@code displacedCodeAddress}, which runs the displaced instructions
 * without the hand-off (Linux's {@code setup_detour_execution}). At {@code simulateAddress} the live
 * registers are the guest's state at the probe: the host simulates the instruction with
 * {@code pc = probe address}, writes its results and, when it branches, writes the new pc; without a
 * pc write execution falls into the branch back to {@code probe + 4}.
 *
 * @param arch                 the architecture
 * @param address              where the buffer lives (its first byte is the jump target)
 * @param code                 the bytes to write there
 * @param style                frame or live registers
 * @param region               the displaced region this buffer serves
 * @param handOffAddress       where the engine's handler hook goes
 * @param displacedCodeAddress the relocated displaced instructions
 * @param simulateAddress      arm64: the hand-off that simulates the displaced instruction, if any
 * @param returnAddress        where the buffer jumps back to
 */
public record DetourBuffer(Arch arch, long address, byte[] code, Style style, DisplacedRegion region,
                           long handOffAddress, long displacedCodeAddress, OptionalLong simulateAddress,
                           long returnAddress) {

    /** How the handlers see the registers. */
    public enum Style {
        /** Registers saved into a pt_regs frame on the stack, restored after the hand-off. */
        FRAME,
        /** No frame: the hand-off is the buffer's first instruction; registers are live. */
        LIVE_REGISTERS
    }

    public DetourBuffer {
        code = code.clone();
    }

    @Override
    public byte[] code() {
        return code.clone();
    }

    /** Size of the buffer in bytes. */
    public int size() {
        return code.length;
    }

    /** Builds an x86-64 detour with a pt_regs frame. */
    public static DetourBuffer x86(DisplacedRegion region, long address) {
        return X86Detour.build(region, address, Style.FRAME);
    }

    /** Builds an x86-64 detour. */
    public static DetourBuffer x86(DisplacedRegion region, long address, Style style) {
        return X86Detour.build(region, address, style);
    }

    /** Builds an arm64 detour with a pt_regs frame. */
    public static DetourBuffer arm64(DisplacedRegion region, long address) {
        return Arm64Detour.build(region, address, Style.FRAME);
    }

    /** Builds an arm64 detour. */
    public static DetourBuffer arm64(DisplacedRegion region, long address, Style style) {
        return Arm64Detour.build(region, address, style);
    }

    /** Builds a detour for {@code region}'s arch. */
    public static DetourBuffer build(DisplacedRegion region, long address, Style style) {
        return ArchOptimizer.of(region.arch()).detour(region, address, style);
    }

    /** An upper bound of {@link #size()} for any region of {@code arch} (for sizing buffer slots). */
    public static int maxSize(Arch arch) {
        return ArchOptimizer.of(arch).maxDetourSize();
    }
}
