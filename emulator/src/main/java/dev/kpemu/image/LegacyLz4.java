package dev.kpemu.image;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import org.apache.commons.compress.compressors.lz4.BlockLZ4CompressorInputStream;

/**
 * The legacy LZ4 frame Linux's kernel payloads use ({@code lz4 -l}): the magic 0x184c2102
 * (little-endian), then blocks of a u32 LE compressed length and an LZ4 block of at most 8 MiB
 * decompressed; the magic may appear again where a length is expected (concatenated frames).
 * Only this container is read here; each block is unpacked by Commons Compress.
 */
final class LegacyLz4 {
    static final int MAGIC = 0x184c2102;
    static final int MAX_BLOCK_OUTPUT = 8 << 20;

    private LegacyLz4() {}

    static byte[] decompress(byte[] data, int offset, int length, String what) throws IOException, KernelImageException {
        ByteBuffer b = ImageFiles.le(data);
        int end = offset + length;
        if (length < 4 || b.getInt(offset) != MAGIC) throw new KernelImageException(what + ": not a legacy LZ4 frame (no magic 0x184c2102)");
        int p = offset + 4;
        ByteArrayOutputStream out = new ByteArrayOutputStream(Math.max(length * 3, 1 << 16));
        while (p < end) {
            if (end - p < 4) throw new KernelImageException(what + ": truncated lz4 payload: " + (end - p) + " stray bytes where a block length belongs");
            int blockLength = b.getInt(p);
            p += 4;
            if (blockLength == MAGIC) continue;
            if (blockLength <= 0 || blockLength > end - p) {
                throw new KernelImageException(what + ": truncated lz4 payload: block at 0x" + Integer.toHexString(p - 4 - offset) + " needs 0x"
                        + Integer.toHexString(blockLength) + " bytes, 0x" + Integer.toHexString(end - p) + " remain");
            }
            try (InputStream in = new BlockLZ4CompressorInputStream(new ByteArrayInputStream(data, p, blockLength))) {
                byte[] block = in.readNBytes(MAX_BLOCK_OUTPUT);
                if (in.read() >= 0) throw new KernelImageException(what + ": corrupt lz4 payload: a block decompresses to more than 8 MiB");
                out.write(block);
            }
            if (out.size() > Compression.MAX_OUTPUT) throw new KernelImageException(what + ": lz4 payload decompresses to more than 1 GiB; not a kernel");
            p += blockLength;
        }
        return out.toByteArray();
    }
}
