package dev.kpemu.kprobes.arm64;

import dev.kpemu.kprobes.ArchInsn;

/**
 * The arm64 hit-time plan of a probed instruction ({@code arm_kprobe_decode_insn}): step a copy
 * from a slot, or simulate one of the PC-relative / branch classes.
 */
record Arm64Insn(Kind kind, int word) implements ArchInsn {
    enum Kind { COPY, B, BL, B_COND, CBZ, CBNZ, TBZ, TBNZ, ADR, ADRP, LDR_LITERAL, LDRSW_LITERAL, BR, BLR, RET, NOP }

    @Override public int length() { return 4; }

    @Override public boolean outOfLine() { return kind == Kind.COPY; }

    /** Steppable instructions never refer to the PC, so a slot can always branch back (a kpemu extension; Linux does not boost on arm64). */
    @Override public boolean boostable() { return kind == Kind.COPY; }
}
