package dev.kpemu.decoder;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.junit.jupiter.api.Test;

/**
 * The exclusive-sequence scan on hand-encoded words (Arm ARM: {@code ldxr x0, [x1]} = 0xc85f7c20,
 * {@code stxr w2, x0, [x1]} = 0xc8027c20, {@code nop} = 0xd503201f), with Linux's 32-instruction
 * window ({@code MAX_ATOMIC_CONTEXT_SIZE}).
 */
class Arm64ExclusiveWindowTest {
    static final int LDXR = 0xc85f7c20, STXR = 0xc8027c20, NOP = 0xd503201f;

    static byte[] text(int... words) {
        ByteBuffer b = ByteBuffer.allocate(4 * words.length).order(ByteOrder.LITTLE_ENDIAN);
        for (int w : words) b.putInt(w);
        return b.array();
    }

    @Test
    void insideAfterALoadExclusiveOutsideAfterTheStore() {
        byte[] t = text(NOP, LDXR, NOP, NOP, STXR, NOP);
        assertEquals(0, Arm64ExclusiveWindow.openLoadExclusive(t, 4), "the ldxr itself starts no window before it");
        assertEquals(1, Arm64ExclusiveWindow.openLoadExclusive(t, 8));
        assertEquals(3, Arm64ExclusiveWindow.openLoadExclusive(t, 16), "the stxr is still inside");
        assertEquals(0, Arm64ExclusiveWindow.openLoadExclusive(t, 20), "after the store-exclusive");
        assertEquals(0, Arm64ExclusiveWindow.openLoadExclusive(t, 0), "nothing before the function");
    }

    @Test
    void theScanStopsAfterThirtyTwoInstructions() {
        int[] w = new int[34];
        java.util.Arrays.fill(w, NOP);
        w[0] = LDXR;
        assertEquals(32, Arm64ExclusiveWindow.openLoadExclusive(text(w), 4 * 32));
        assertEquals(0, Arm64ExclusiveWindow.openLoadExclusive(text(w), 4 * 33));
    }
}
