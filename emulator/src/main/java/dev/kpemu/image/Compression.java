package dev.kpemu.image;

import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import java.io.ByteArrayInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.util.zip.GZIPInputStream;
import org.apache.commons.compress.compressors.bzip2.BZip2CompressorInputStream;
import org.tukaani.xz.LZMAInputStream;
import org.tukaani.xz.SingleXZInputStream;

/**
 * The compressions Linux offers for a kernel payload (bzImage, EFI zboot, {@code Image.gz}),
 * recognised by their magic bytes and unpacked with library decompressors: the JDK (gzip),
 * Apache Commons Compress (bzip2, LZ4 blocks), XZ for Java (xz, lzma), zstd-jni (zstd) and
 * aircompressor (LZO1X blocks). Only the legacy-LZ4 and lzop containers are parsed here
 * ({@link LegacyLz4}, {@link Lzop}).
 */
public enum Compression {
    GZIP("gzip", 0x1f, 0x8b),
    BZIP2("bzip2", 'B', 'Z', 'h'),
    /** The "alone" .lzma format: properties byte 0x5d (lc 3, lp 0, pb 2) and a dictionary size. */
    LZMA("lzma", 0x5d, 0x00, 0x00),
    XZ("xz", 0xfd, '7', 'z', 'X', 'Z', 0x00),
    /** An lzop file, what Linux's {@code lzop -9} writes. */
    LZO("lzo", 0x89, 'L', 'Z', 'O', 0x00, 0x0d, 0x0a, 0x1a, 0x0a),
    /** The legacy LZ4 frame ({@code lz4 -l}), magic 0x184c2102 little-endian. */
    LZ4("lz4", 0x02, 0x21, 0x4c, 0x18),
    ZSTD("zstd", 0x28, 0xb5, 0x2f, 0xfd);

    /** Decompressed kernels larger than this are refused (a corrupt size, not a kernel). */
    static final long MAX_OUTPUT = 1L << 30;

    private final String toolName;
    private final byte[] magic;

    Compression(String toolName, int... magic) {
        this.toolName = toolName;
        this.magic = new byte[magic.length];
        for (int i = 0; i < magic.length; i++) this.magic[i] = (byte) magic[i];
    }

    /** The name Linux's Kconfig and the command-line tool use: "gzip", "zstd", ... */
    public String toolName() { return toolName; }

    /** True when {@code data} holds this compression's magic at {@code offset}. */
    public boolean matches(byte[] data, int offset) { return ImageFiles.startsWith(data, offset, magic); }

    /** The compression whose magic starts at {@code offset}, or null. */
    public static Compression detect(byte[] data, int offset) {
        for (Compression c : values()) if (c.matches(data, offset)) return c;
        return null;
    }

    /**
     * Decompresses {@code length} bytes at {@code offset} (exactly the compressed stream: gzip's
     * own size field included, the 4-byte size Linux appends to the others excluded).
     *
     * @param expectedSize the decompressed size the container announces, or -1; a different
     *                     result is refused
     * @param what         what is being decompressed, for one-line messages
     */
    public byte[] decompress(byte[] data, int offset, int length, long expectedSize, String what) throws KernelImageException {
        if (offset < 0 || length < 0 || (long) offset + length > data.length) {
            throw new KernelImageException(what + ": " + toolName + " data at 0x" + Integer.toHexString(offset) + "+0x"
                    + Integer.toHexString(length) + " lies outside the " + data.length + "-byte file");
        }
        if (expectedSize > MAX_OUTPUT) {
            throw new KernelImageException(what + ": corrupt " + toolName + " payload: announced size " + expectedSize + " bytes is not a kernel's");
        }
        byte[] out;
        try {
            out = switch (this) {
                case LZ4 -> LegacyLz4.decompress(data, offset, length, what);
                case LZO -> Lzop.decompress(data, offset, length, what);
                default -> {
                    try (InputStream in = stream(new ByteArrayInputStream(data, offset, length))) {
                        yield readAll(in, expectedSize, what);
                    }
                }
            };
        } catch (KernelImageException e) {
            throw e;
        } catch (EOFException e) {
            throw new KernelImageException(what + ": truncated " + toolName + " payload: the compressed data ends early", e);
        } catch (IOException | RuntimeException e) {
            String m = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage().lines().findFirst().orElse("");
            throw new KernelImageException(what + ": corrupt or truncated " + toolName + " payload: " + m, e);
        }
        if (expectedSize >= 0 && out.length != expectedSize) {
            throw new KernelImageException(what + ": corrupt or truncated " + toolName + " payload: decompressed to " + out.length
                    + " bytes, the size field says " + expectedSize);
        }
        return out;
    }

    private InputStream stream(InputStream in) throws IOException {
        return switch (this) {
            case GZIP -> new GZIPInputStream(in, 1 << 16);
            case BZIP2 -> new BZip2CompressorInputStream(in, false);
            case LZMA -> new LZMAInputStream(in);
            case XZ -> new SingleXZInputStream(in);
            case ZSTD -> new ZstdInputStreamNoFinalizer(in);
            case LZ4, LZO -> throw new IllegalStateException(this + " is unpacked block by block");
        };
    }

    /** Reads the whole stream: straight into an array of the announced size when there is one. */
    private byte[] readAll(InputStream in, long expectedSize, String what) throws IOException, KernelImageException {
        if (expectedSize < 0) {
            byte[] out = in.readNBytes((int) MAX_OUTPUT);
            if (out.length == MAX_OUTPUT && in.read() >= 0) {
                throw new KernelImageException(what + ": " + toolName + " payload decompresses to more than " + (MAX_OUTPUT >> 20) + " MiB; not a kernel");
            }
            return out;
        }
        byte[] out = new byte[(int) expectedSize];
        int n = in.readNBytes(out, 0, out.length);
        if (n < out.length) return java.util.Arrays.copyOf(out, n);
        if (in.read() >= 0) {
            throw new KernelImageException(what + ": corrupt " + toolName + " payload: decompresses to more than the " + expectedSize + " bytes its size field says");
        }
        return out;
    }
}
