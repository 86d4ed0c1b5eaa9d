package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A kernel file read in ranges and windows gives the bytes the whole file holds, without being read whole. */
class OnDemandFileBytesTest {
    static final int CHUNK = FileBytes.CHUNK;

    static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    @Test
    void scanOffersEveryPositionOnceWithItsLookahead(@TempDir Path tmp) throws Exception {
        for (int size : new int[]{1, 10, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 7, 3 * CHUNK}) {
            byte[] data = random(size, size);
            Path f = Files.write(tmp.resolve("f" + size), data);
            for (int lookahead : new int[]{0, 4, 100, 4096}) {
                OnDemandFileBytes file = OnDemandFileBytes.of(f, size);
                long[] next = {0};
                file.scan(lookahead, (windowAt, w, from, to, len) -> {
                    for (int i = from; i < to; i++) {
                        assertEquals(next[0], windowAt + i, "positions in order, each once");
                        assertEquals(data[(int) (windowAt + i)], w[i], "the window holds the file's byte");
                        long after = Math.min(lookahead, size - (windowAt + i) - 1);
                        assertTrue(i + after < len, "lookahead of " + lookahead + " at " + (windowAt + i) + " of " + size);
                        assertEquals(data[(int) (windowAt + i + after)], w[(int) (i + after)]);
                        next[0]++;
                    }
                    return false;
                });
                assertEquals(size, next[0], "every position of a " + size + "-byte file, lookahead " + lookahead);
                assertFalse(file.loaded(), "a scan does not keep the file");
            }
        }
    }

    @Test
    void rangesAndTheWholeFileAreTheFilesBytes(@TempDir Path tmp) throws Exception {
        byte[] data = random(2 * CHUNK + 11, 7);
        Path f = Files.write(tmp.resolve("k"), data);
        OnDemandFileBytes file = OnDemandFileBytes.of(f, data.length);
        for (long at : new long[]{0, 5, CHUNK - 3, CHUNK, 2L * CHUNK + 1}) {
            byte[] r = file.read(at, 9);
            for (int i = 0; i < 9; i++) assertEquals(data[(int) at + i], r[i]);
        }
        assertArrayEquals(java.util.Arrays.copyOf(data, 64), file.head(64));
        assertFalse(file.loaded());
        assertArrayEquals(data, file.bytes());
        assertTrue(file.loaded());
    }

    @Test
    void aBannerAcrossAWindowsEdgeIsFound(@TempDir Path tmp) throws Exception {
        byte[] banner = "Linux version 6.1.0-99-test (debian-kernel@lists.debian.org) (gcc)".getBytes(StandardCharsets.US_ASCII);
        for (int at : new int[]{0, CHUNK - 20, CHUNK - 1, CHUNK + 3, 2 * CHUNK + 9 - banner.length}) {
            byte[] data = new byte[2 * CHUNK + 9];
            data[at > 0 ? at - 1 : 0] = 'L';   // a near miss first
            System.arraycopy(banner, 0, data, at, banner.length);
            Path f = Files.write(tmp.resolve("b" + at), data);
            OnDemandFileBytes file = OnDemandFileBytes.of(f, data.length);
            assertEquals(KernelRelease.of(data), KernelRelease.of(file), "banner at " + at);
            assertEquals("6.1.0-99-test", KernelRelease.of(file).orElse(""), "banner at " + at);
            assertFalse(file.loaded());
        }
    }
}
