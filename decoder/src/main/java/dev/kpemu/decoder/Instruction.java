package dev.kpemu.decoder;

import java.util.Arrays;
import java.util.HexFormat;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * A decoded instruction and what a probe engine needs to know about it.
 *
 * @param address      address the instruction was decoded at
 * @param bytes        its bytes (defensively copied)
 * @param mnemonic     mnemonic, Capstone spelling ({@code "mov"}, {@code "b.eq"})
 * @param operands     operand text, Capstone spelling (Intel syntax on x86)
 * @param branchKind   how it changes control flow
 * @param branchTarget absolute target of a direct branch or call, empty otherwise
 * @param pcRelative   its PC-relative reference, if any
 * @param outOfLine    how it can be run away from its address (Linux kprobes rules)
 * @param boostable    x86: Linux's {@code can_boost} (a copy may be followed by a {@code jmp} back
 *                     instead of a second trap); always false on arm64, which has no boosting
 */
public record Instruction(long address, byte[] bytes, String mnemonic, String operands, BranchKind branchKind,
                          OptionalLong branchTarget, Optional<PcRelative> pcRelative, OutOfLine outOfLine,
                          boolean boostable) {

    public Instruction {
        bytes = bytes.clone();
        Objects.requireNonNull(mnemonic);
        Objects.requireNonNull(operands);
        Objects.requireNonNull(branchKind);
        Objects.requireNonNull(branchTarget);
        Objects.requireNonNull(pcRelative);
        Objects.requireNonNull(outOfLine);
    }

    @Override
    public byte[] bytes() {
        return bytes.clone();
    }

    /** Length in bytes. */
    public int length() {
        return bytes.length;
    }

    /** Address of the following instruction. */
    public long nextAddress() {
        return address + bytes.length;
    }

    /** Mnemonic and operands, e.g. {@code "mov rax, qword ptr [rip + 0x1234]"}. */
    public String text() {
        return operands.isEmpty() ? mnemonic : mnemonic + " " + operands;
    }

    /**
     * True if the instruction can run from another address ({@link OutOfLine#COPY} or
     * {@link OutOfLine#COPY_WITH_FIXUP}); PC-relative branches are not relocatable, they must be simulated.
     */
    public boolean relocatable() {
        return outOfLine == OutOfLine.COPY || outOfLine == OutOfLine.COPY_WITH_FIXUP;
    }

    /**
     * The bytes to execute at {@code newAddress} instead of {@link #address()}: a plain copy for
     * {@link OutOfLine#COPY}, with the RIP-relative displacement rewritten for
     * {@link OutOfLine#COPY_WITH_FIXUP} (Linux's {@code __copy_instruction}).
     *
     * @throws IllegalStateException    if the instruction is not {@linkplain #relocatable() relocatable}
     * @throws IllegalArgumentException if the new displacement does not fit its field
     */
    public byte[] relocatedTo(long newAddress) {
        byte[] copy = bytes.clone();
        switch (outOfLine) {
            case COPY -> { }
            case COPY_WITH_FIXUP -> {
                PcRelative ref = pcRelative.orElseThrow();
                long disp = ref.target() - (newAddress + copy.length);
                int bits = ref.fieldSize() * 8;
                if (bits < 64 && (disp < -(1L << (bits - 1)) || disp >= (1L << (bits - 1)))) {
                    throw new IllegalArgumentException(String.format(
                            "new displacement does not fit into s%d (%#x) for %s moved to %#x", bits, disp, this,
                            newAddress));
                }
                for (int i = 0; i < ref.fieldSize(); i++) {
                    copy[ref.fieldOffset() + i] = (byte) (disp >>> (8 * i));
                }
            }
            default -> throw new IllegalStateException(this + " is not relocatable (" + outOfLine + ")");
        }
        return copy;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Instruction i && address == i.address && Arrays.equals(bytes, i.bytes)
                && mnemonic.equals(i.mnemonic) && operands.equals(i.operands) && branchKind == i.branchKind
                && branchTarget.equals(i.branchTarget) && pcRelative.equals(i.pcRelative)
                && outOfLine == i.outOfLine && boostable == i.boostable;
    }

    @Override
    public int hashCode() {
        return Objects.hash(address, Arrays.hashCode(bytes), mnemonic, operands, branchKind, branchTarget,
                pcRelative, outOfLine, boostable);
    }

    @Override
    public String toString() {
        return String.format("%#x: %s [%s] %s%s %s%s", address, text(), HexFormat.ofDelimiter(" ").formatHex(bytes),
                branchKind, branchTarget.isPresent() ? String.format("->%#x", branchTarget.getAsLong()) : "",
                outOfLine, boostable ? " boostable" : "");
    }
}
