package dev.kpemu.decoder;

/**
 * Linux's arm64 rule for load/store-exclusive sequences ({@code arch/arm64/kernel/probes/decode-insn.c},
 * {@code is_probed_address_atomic}): scanning back from an instruction over at most
 * {@value #MAX_ATOMIC_CONTEXT_SIZE} instructions, a store-exclusive found first means the
 * instruction is outside any sequence, a load-exclusive found first means it is inside one (a
 * breakpoint or a detour there would clear the exclusive monitor and could livelock the loop).
 * Written once here for the kprobes decoder and the optimizer's rules.
 */
public final class Arm64ExclusiveWindow {
    /** {@code MAX_ATOMIC_CONTEXT_SIZE}: instructions scanned back. */
    public static final int MAX_ATOMIC_CONTEXT_SIZE = 32;

    private Arm64ExclusiveWindow() {}

    /**
     * How many instructions before the one at {@code offset} in {@code text} the open
     * load-exclusive is (1: the instruction just before), or 0 when the instruction is in no
     * sequence. Scans at most {@value #MAX_ATOMIC_CONTEXT_SIZE} instructions and never before
     * {@code text}'s start (the function's first instruction).
     */
    public static int openLoadExclusive(byte[] text, int offset) {
        int limit = Math.min(MAX_ATOMIC_CONTEXT_SIZE, offset / 4);
        for (int k = 1; k <= limit; k++) {
            int at = offset - 4 * k;
            int w = (text[at] & 0xff) | (text[at + 1] & 0xff) << 8 | (text[at + 2] & 0xff) << 16 | (text[at + 3] & 0xff) << 24;
            if (Arm64Encoding.STORE_EXCLUSIVE.matches(w)) return 0;
            if (Arm64Encoding.LOAD_EXCLUSIVE.matches(w)) return k;
        }
        return 0;
    }
}
