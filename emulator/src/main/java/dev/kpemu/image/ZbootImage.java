package dev.kpemu.image;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * An EFI zboot image ({@code vmlinuz.efi}, CONFIG_EFI_ZBOOT; what Fedora and Ubuntu ship for
 * arm64): a PE executable that decompresses the kernel it carries. Its DOS header
 * (drivers/firmware/efi/libstub/zboot-header.S) tells a non-EFI loader where the payload is:
 *
 * <pre>
 *   0x00 "MZ"   0x04 "zimg"   0x08 u32 payload offset   0x0c u32 payload size
 *   0x10 u32 reserved x2      0x18 compression type, NUL-terminated ("gzip", "zstd22", "xzkern", ...)
 * </pre>
 *
 * The payload size excludes the 4-byte decompressed size Linux appends after non-gzip payloads
 * (Makefile.zboot); decompressed, the payload is the raw arm64 {@code Image} padded to its
 * image_size.
 *
 * @param name            file the header came from (for messages)
 * @param payloadOffset   file offset of the compressed payload
 * @param payloadSize     bytes of compressed payload
 * @param compressionType the header's compression type string
 */
public record ZbootImage(String name, int payloadOffset, int payloadSize, String compressionType) {
    static final int TYPE_AT = 0x18, TYPE_MAX = 32;

    /** True when {@code d} starts with "MZ" and has "zimg" at offset 4. */
    public static boolean isZboot(byte[] d) {
        return ImageFiles.startsWith(d, 0, (byte) 'M', (byte) 'Z') && ImageFiles.startsWith(d, 4, (byte) 'z', (byte) 'i', (byte) 'm', (byte) 'g');
    }

    public static ZbootImage parse(byte[] d, String name) throws KernelImageException {
        if (!isZboot(d) || d.length < TYPE_AT + TYPE_MAX) {
            throw new KernelImageException(name + ": not an EFI zboot image (no \"zimg\" after \"MZ\"): it is " + ImageFiles.describe(d));
        }
        ByteBuffer b = ImageFiles.le(d);
        long offset = b.getInt(8) & 0xffffffffL, size = b.getInt(12) & 0xffffffffL;
        int typeEnd = TYPE_AT;
        while (typeEnd < TYPE_AT + TYPE_MAX && d[typeEnd] != 0) typeEnd++;
        String type = new String(d, TYPE_AT, typeEnd - TYPE_AT, StandardCharsets.US_ASCII);
        if (offset < TYPE_AT + 4 || size == 0 || offset + size > d.length) {
            throw new KernelImageException(name + ": truncated or corrupt EFI zboot image: payload at 0x" + Long.toHexString(offset)
                    + "+0x" + Long.toHexString(size) + " lies outside the " + d.length + "-byte file");
        }
        return new ZbootImage(name, (int) offset, (int) size, type);
    }

    /** The payload's compression, recognised by its magic (the type string only names it). */
    public Compression compression(byte[] d) throws KernelImageException {
        Compression c = Compression.detect(d, payloadOffset);
        if (c == null) {
            throw new KernelImageException(name + ": EFI zboot payload (type \"" + compressionType + "\") has no known compression magic");
        }
        return c;
    }

    /** Decompresses the payload: the raw arm64 Image. */
    public byte[] decompress(byte[] d) throws KernelImageException {
        Compression c = compression(d);
        long expected = -1;
        int end = payloadOffset + payloadSize;
        if (c == Compression.GZIP) {
            expected = ImageFiles.le(d).getInt(end - 4) & 0xffffffffL;
        } else if (end + 4 <= d.length) {
            expected = ImageFiles.le(d).getInt(end) & 0xffffffffL;
        }
        if (expected > Compression.MAX_OUTPUT) expected = -1;   // not a size: the data after the payload is no size field
        return c.decompress(d, payloadOffset, payloadSize, expected, name);
    }
}
