package dev.kpemu.image;

import io.airlift.compress.v3.MalformedInputException;
import io.airlift.compress.v3.lzo.LzoDecompressor;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.zip.Adler32;
import java.util.zip.CRC32;
import java.util.zip.Checksum;

/**
 * An lzop file, what Linux's {@code lzop -9} makes of a kernel payload. All fields big-endian:
 * the 9-byte magic, version, library version, [version needed when version >= 0x0940], method,
 * [level when version >= 0x0940], flags, [filter when F_H_FILTER], mode, mtime low,
 * [mtime high when version >= 0x0940], name length and name, header checksum, [extra field
 * when F_H_EXTRA_FIELD]; then blocks of uncompressed length (0 ends the file), compressed length,
 * the checksums the flags ask for, and the data (stored as is when both lengths are equal). Only
 * this container is read here; the LZO1X blocks are unpacked by aircompressor.
 */
final class Lzop {
    private static final int F_ADLER32_D = 0x1, F_ADLER32_C = 0x2, F_H_EXTRA_FIELD = 0x40, F_CRC32_D = 0x100,
            F_CRC32_C = 0x200, F_H_FILTER = 0x800;
    private static final int MAGIC_LENGTH = 9;
    /** lzop writes blocks of 256 KiB; its reader accepts up to 64 MiB. */
    private static final int MAX_BLOCK = 64 << 20;

    private Lzop() {}

    static byte[] decompress(byte[] data, int offset, int length, String what) throws KernelImageException {
        Reader r = new Reader(data, offset, offset + length, what);
        r.skip(MAGIC_LENGTH);
        int version = r.u16();
        r.skip(2);                                  // library version
        if (version >= 0x0940) r.skip(2);           // version needed to extract
        int method = r.u8();
        if (method < 1 || method > 3) throw new KernelImageException(what + ": lzo payload uses method " + method + ", not LZO1X (1-3)");
        if (version >= 0x0940) r.skip(1);           // level
        int flags = r.u32();
        if ((flags & F_H_FILTER) != 0) throw new KernelImageException(what + ": lzo payload uses an lzop filter, which no kernel build does");
        r.skip(8);                                  // mode, mtime low
        if (version >= 0x0940) r.skip(4);           // mtime high
        r.skip(r.u8());                             // name
        r.skip(4);                                  // header checksum
        if ((flags & F_H_EXTRA_FIELD) != 0) r.skip(r.u32() + 4L);

        LzoDecompressor lzo = new LzoDecompressor();
        ByteArrayOutputStream out = new ByteArrayOutputStream(Math.max(length * 3, 1 << 16));
        while (true) {
            int blockOffset = r.pos - offset;
            long plainLength = r.u32() & 0xffffffffL;
            if (plainLength == 0) break;
            long packedLength = r.u32() & 0xffffffffL;
            if (plainLength > MAX_BLOCK || packedLength == 0 || packedLength > plainLength) {
                throw new KernelImageException(what + ": corrupt lzo payload: block at 0x" + Integer.toHexString(blockOffset)
                        + " has lengths 0x" + Long.toHexString(packedLength) + " -> 0x" + Long.toHexString(plainLength));
            }
            long adler = (flags & F_ADLER32_D) != 0 ? r.u32() & 0xffffffffL : -1;
            long crc = (flags & F_CRC32_D) != 0 ? r.u32() & 0xffffffffL : -1;
            if (packedLength < plainLength) {
                if ((flags & F_ADLER32_C) != 0) r.skip(4);
                if ((flags & F_CRC32_C) != 0) r.skip(4);
            }
            int at = r.take((int) packedLength);
            byte[] block;
            if (packedLength == plainLength) {
                block = java.util.Arrays.copyOfRange(data, at, at + (int) plainLength);
            } else {
                block = new byte[(int) plainLength];
                int n;
                try {
                    n = lzo.decompress(data, at, (int) packedLength, block, 0, block.length);
                } catch (MalformedInputException e) {
                    throw new KernelImageException(what + ": corrupt lzo payload: block at 0x" + Integer.toHexString(blockOffset) + ": " + e.getMessage(), e);
                }
                if (n != plainLength) {
                    throw new KernelImageException(what + ": corrupt lzo payload: block at 0x" + Integer.toHexString(blockOffset) + " gives " + n
                            + " bytes, its header says " + plainLength);
                }
            }
            check(new Adler32(), adler, block, "Adler-32", blockOffset, what);
            check(new CRC32(), crc, block, "CRC-32", blockOffset, what);
            out.write(block, 0, block.length);
            if (out.size() > Compression.MAX_OUTPUT) throw new KernelImageException(what + ": lzo payload decompresses to more than 1 GiB; not a kernel");
        }
        return out.toByteArray();
    }

    private static void check(Checksum sum, long expected, byte[] block, String kind, int blockOffset, String what) throws KernelImageException {
        if (expected < 0) return;
        sum.update(block, 0, block.length);
        if (sum.getValue() != expected) {
            throw new KernelImageException(what + ": corrupt lzo payload: " + kind + " mismatch in the block at 0x" + Integer.toHexString(blockOffset));
        }
    }

    /** Big-endian reads within [pos, end) that refuse to run past the end as a truncation. */
    private static final class Reader {
        final byte[] data;
        final ByteBuffer be;
        final int end;
        final String what;
        int pos;

        Reader(byte[] data, int pos, int end, String what) {
            this.data = data; this.be = ByteBuffer.wrap(data); this.pos = pos; this.end = end; this.what = what;
        }

        int take(int n) throws KernelImageException {
            if (n < 0 || n > end - pos) throw new KernelImageException(what + ": truncated lzo payload: the compressed data ends early");
            int at = pos;
            pos += n;
            return at;
        }

        void skip(long n) throws KernelImageException { take((int) Math.min(n, Integer.MAX_VALUE)); }
        int u8() throws KernelImageException { return data[take(1)] & 0xff; }
        int u16() throws KernelImageException { return be.getShort(take(2)) & 0xffff; }
        int u32() throws KernelImageException { return be.getInt(take(4)); }
    }
}
