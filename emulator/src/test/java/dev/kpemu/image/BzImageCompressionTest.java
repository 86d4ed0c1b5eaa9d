package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.*;

import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A bzImage with each payload compression Linux offers, the payload made by Debian's own tool
 * the way Linux's build makes it (gzip's own size field; the 4-byte size appended to the
 * others), unpacks to the same bytes; damaged and truncated payloads are refused in one line.
 */
class BzImageCompressionTest {
    static final byte[] VMLINUX = SyntheticKernels.vmlinux(1 << 20, 1);

    /** The bzImage payload Linux's build would make from {@code vmlinux} with {@code c}. */
    static byte[] payload(Compression c, byte[] vmlinux) throws Exception {
        byte[] stream = CompressionTools.compress(c, vmlinux);
        return c == Compression.GZIP ? stream : SyntheticKernels.withSize(stream, vmlinux.length);
    }

    @ParameterizedTest
    @EnumSource(Compression.class)
    void everyCompressionUnpacksToTheSameBytes(Compression c) throws Exception {
        BzImage bz = BzImage.parse(SyntheticKernels.bzImage(payload(c, VMLINUX)), "bz-" + c.toolName());
        assertEquals(c, bz.compression());
        assertEquals(c.toolName(), bz.payloadCompression());
        assertEquals(VMLINUX.length, bz.trailerSize());
        assertArrayEquals(VMLINUX, bz.extractVmlinux());
    }

    @ParameterizedTest
    @EnumSource(Compression.class)
    void aPayloadThatEndsEarlyIsRefused(Compression c) throws Exception {
        byte[] stream = CompressionTools.compress(c, VMLINUX);
        byte[] cut = Arrays.copyOf(stream, stream.length * 2 / 3);
        // the bzImage's own bounds are consistent: only the compressed data ends early
        BzImage bz = BzImage.parse(SyntheticKernels.bzImage(SyntheticKernels.withSize(cut, VMLINUX.length)), "cut-" + c.toolName());
        String m = assertThrows(KernelImageException.class, bz::extractVmlinux).getMessage();
        assertTrue(m.startsWith("cut-" + c.toolName() + ": "), m);
        assertTrue(m.contains("truncated " + c.toolName() + " payload") || m.contains("corrupt or truncated " + c.toolName() + " payload"), m);
        assertFalse(m.contains("\n"), m);
    }

    @Test
    void aMultiBlockLz4PayloadUnpacks() throws Exception {
        byte[] big = SyntheticKernels.vmlinux(9 << 20, 2);   // more than one 8 MiB legacy block
        BzImage bz = BzImage.parse(SyntheticKernels.bzImage(payload(Compression.LZ4, big)), "bz-lz4");
        assertArrayEquals(big, bz.extractVmlinux());
    }

    @Test
    void aSizeTrailerThatDisagreesIsRefused() throws Exception {
        byte[] stream = CompressionTools.compress(Compression.ZSTD, VMLINUX);
        BzImage bz = BzImage.parse(SyntheticKernels.bzImage(SyntheticKernels.withSize(stream, VMLINUX.length + 4096)), "bz");
        String m = assertThrows(KernelImageException.class, bz::extractVmlinux).getMessage();
        assertTrue(m.contains("decompressed to " + VMLINUX.length + " bytes, the size field says " + (VMLINUX.length + 4096)), m);
        bz = BzImage.parse(SyntheticKernels.bzImage(SyntheticKernels.withSize(stream, VMLINUX.length - 1)), "bz");
        m = assertThrows(KernelImageException.class, bz::extractVmlinux).getMessage();
        assertTrue(m.contains("decompresses to more than the " + (VMLINUX.length - 1) + " bytes"), m);
    }

    @Test
    void anUnknownOrNonElfPayloadIsRefused() throws Exception {
        byte[] junk = new byte[4096];
        Arrays.fill(junk, (byte) 0x33);
        String m = assertThrows(KernelImageException.class, () -> BzImage.parse(SyntheticKernels.bzImage(junk), "bz").extractVmlinux()).getMessage();
        assertTrue(m.contains("no known compression magic"), m);
        byte[] text = Arrays.copyOfRange(VMLINUX, 4, VMLINUX.length);
        m = assertThrows(KernelImageException.class,
                () -> BzImage.parse(SyntheticKernels.bzImage(payload(Compression.XZ, text)), "bz").extractVmlinux()).getMessage();
        assertTrue(m.contains("does not decompress to an ELF vmlinux"), m);
    }

    @Test
    void damagedLzoAndLz4ContainersAreRefused() throws Exception {
        byte[] lzo = CompressionTools.compress(Compression.LZO, VMLINUX);
        byte[] flipped = lzo.clone();
        for (int i = lzo.length / 2; i < lzo.length / 2 + 64; i++) flipped[i] ^= 0x55;
        String m = assertThrows(KernelImageException.class,
                () -> Compression.LZO.decompress(flipped, 0, flipped.length, VMLINUX.length, "lzo")).getMessage();
        assertTrue(m.startsWith("lzo: corrupt"), m);
        byte[] lz4 = CompressionTools.compress(Compression.LZ4, VMLINUX);
        SyntheticKernels.le(lz4).putInt(4, lz4.length);      // first block longer than the data
        m = assertThrows(KernelImageException.class, () -> Compression.LZ4.decompress(lz4, 0, lz4.length, -1, "lz4")).getMessage();
        assertTrue(m.contains("truncated lz4 payload: block at 0x4 needs"), m);
    }
}
