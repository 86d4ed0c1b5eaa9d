package dev.kpemu.boot;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * The spin-wait sites {@link SpinWaitYields} finds in kernel text, from bytes handed out in chunks
 * that cut instructions (as the kernel file's readers do): x86's {@code pause} ({@code f3 90}, SDM),
 * arm64's {@code wfe} and {@code yield} (A64 hint encodings {@code d503205f}, {@code d503203f}) and
 * no other hint ({@code nop} {@code d503201f}, {@code wfi} {@code d503207f}, {@code sev} {@code d503209f}).
 */
class SpinWaitYieldsTest {
    /** {@code bytes} as a file at {@code fileStart}, in chunks of {@code chunk} bytes. */
    static SpinWaitYields.Source chunked(byte[] bytes, long fileStart, int chunk) {
        return sink -> {
            for (int at = 0; at < bytes.length; at += chunk) {
                int n = Math.min(chunk, bytes.length - at);
                byte[] copy = new byte[n + 7];                  // a chunk in a larger buffer, at an offset
                System.arraycopy(bytes, at, copy, 3, n);
                sink.accept(fileStart + at, copy, 3, n);
            }
        };
    }

    static byte[] words(int... insns) {
        byte[] b = new byte[insns.length * 4];
        for (int i = 0; i < insns.length; i++) {
            for (int k = 0; k < 4; k++) b[4 * i + k] = (byte) (insns[i] >>> (8 * k));
        }
        return b;
    }

    @Test
    void x86PauseSitesAreTheAddressesOfEachF390() throws Exception {
        // nop; pause; xor %eax,%eax (31 c0); pause; f3 alone (rep prefix of ret: f3 c3); 90 alone; pause at the end
        byte[] text = {(byte) 0x90, (byte) 0xf3, (byte) 0x90, 0x31, (byte) 0xc0, (byte) 0xf3, (byte) 0x90,
                (byte) 0xf3, (byte) 0xc3, (byte) 0x90, (byte) 0xf3, (byte) 0x90};
        long va = 0xffffffff81000000L;
        List<Long> expected = List.of(va + 1, va + 5, va + 10);
        for (int chunk : new int[] {1, 2, 3, 5, 64}) {
            assertEquals(expected, SpinWaitYields.x86Sites(va, 0x1000, chunked(text, 0x1000, chunk)), "chunks of " + chunk);
        }
    }

    @Test
    void arm64SitesAreTheWordsOfEachWfeAndYield() throws Exception {
        int nop = 0xd503201f, wfi = 0xd503207f, sev = 0xd503209f, ret = 0xd65f03c0;
        byte[] text = words(nop, SpinWaitYields.ARM64_WFE, wfi, SpinWaitYields.ARM64_YIELD, sev, ret, SpinWaitYields.ARM64_WFE);
        long va = 0xffff800008010000L;
        List<Long> expected = List.of(va + 4, va + 12, va + 24);
        for (int chunk : new int[] {1, 3, 4, 5, 4096}) {
            assertEquals(expected, SpinWaitYields.arm64Sites(va, 0x10000, chunked(text, 0x10000, chunk)), "chunks of " + chunk);
        }
    }

    @Test
    void arm64CountsOnlyAlignedWords() throws Exception {
        // a wfe's bytes across two words (offset 2) is no instruction
        byte[] w = words(SpinWaitYields.ARM64_WFE);
        byte[] text = {0, 0, w[0], w[1], w[2], w[3], 0, 0};
        assertEquals(List.of(), SpinWaitYields.arm64Sites(0x1000, 0, chunked(text, 0, 3)));
    }
}
