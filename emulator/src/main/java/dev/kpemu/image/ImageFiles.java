package dev.kpemu.image;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;

/** Shared helpers: reading files with one-line errors and recognising other kernel formats. */
final class ImageFiles {
    private ImageFiles() {}

    static byte[] read(Path path) throws KernelImageException {
        if (path == null) throw new KernelImageException("no kernel image file given");
        if (!Files.exists(path)) throw new KernelImageException(path + ": file does not exist");
        if (!Files.isRegularFile(path)) throw new KernelImageException(path + ": not a regular file");
        try {
            return FileBytes.read(path);
        } catch (NoSuchFileException e) {
            throw new KernelImageException(path + ": file does not exist");
        } catch (IOException e) {
            throw new KernelImageException(path + ": cannot read: " + e.getMessage(), e);
        }
    }

    static ByteBuffer le(byte[] data) { return ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN); }

    static boolean startsWith(byte[] d, int off, byte... magic) {
        if (off < 0 || d.length < off + magic.length) return false;
        for (int i = 0; i < magic.length; i++) if (d[off + i] != magic[i]) return false;
        return true;
    }

    static final byte[] ELF = {0x7f, 'E', 'L', 'F'};

    static boolean isBzImage(byte[] d) { return startsWith(d, 0x202, (byte) 'H', (byte) 'd', (byte) 'r', (byte) 'S'); }
    static boolean isArm64Image(byte[] d) { return startsWith(d, 0x38, (byte) 'A', (byte) 'R', (byte) 'M', (byte) 0x64); }
    static boolean isElf(byte[] d) { return startsWith(d, 0, ELF); }

    /** What a file that is not of the expected format looks like, for error messages. */
    static String describe(byte[] d) {
        if (d.length == 0) return "an empty file";
        if (isBzImage(d)) return "an x86 bzImage";
        if (isArm64Image(d)) return "an arm64 Image";
        if (isElf(d)) {
            int machine = d.length >= 20 ? (d[18] & 0xff) | (d[19] & 0xff) << 8 : -1;
            return "an ELF file (e_machine " + machine + ")";
        }
        if (ZbootImage.isZboot(d)) return "an EFI zboot image";
        Compression c = Compression.detect(d, 0);
        if (c != null) return c.toolName() + "-compressed data";
        if (startsWith(d, 0, (byte) 'M', (byte) 'Z')) return "a PE/EFI executable without a Linux header";
        return "not a Linux kernel image (" + d.length + " bytes)";
    }
}
