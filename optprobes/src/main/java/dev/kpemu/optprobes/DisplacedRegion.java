package dev.kpemu.optprobes;

import dev.kpemu.decoder.Instruction;
import dev.kpemu.machine.Arch;
import java.io.ByteArrayOutputStream;
import java.util.List;

/**
 * The displaced code region (Linux's DCR): the whole instructions starting at the probe address
 * that the jump (x86, at least {@code JMP32_INSN_SIZE} = 5 bytes) or branch (arm64, one
 * instruction) overwrites, and which the detour buffer runs instead.
 *
 * @param arch         the architecture
 * @param probeAddress the insertion address (first byte of the region)
 * @param instructions the displaced instructions, in order, as decoded from the original text
 */
public record DisplacedRegion(Arch arch, long probeAddress, List<Instruction> instructions) {

    public DisplacedRegion {
        instructions = List.copyOf(instructions);
        if (instructions.isEmpty() || instructions.getFirst().address() != probeAddress) {
            throw new IllegalArgumentException("region must start with the instruction at the probe address");
        }
    }

    /** Length in bytes (Linux's {@code op->optinsn.size}). */
    public int length() {
        return (int) (end() - probeAddress);
    }

    /** Address just past the region: where the detour jumps back to. */
    public long end() {
        return instructions.getLast().nextAddress();
    }

    /** True if {@code address} is in the region. */
    public boolean contains(long address) {
        return address - probeAddress >= 0 && address - end() < 0;
    }

    /**
     * True if a thread stopped at {@code pc} (or with {@code pc} as a saved return address) would
     * break if the jump were written now: {@code pc} is inside the region but not at its first byte.
     * The engine must only write the jump while no vCPU and no interrupted context is at such a pc.
     */
    public boolean interior(long pc) {
        return pc != probeAddress && contains(pc);
    }

    /** The original bytes of the region. */
    public byte[] originalBytes() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (Instruction i : instructions) out.writeBytes(i.bytes());
        return out.toByteArray();
    }
}
