package dev.kpemu.image;

import java.nio.ByteBuffer;
import java.nio.file.Path;

/**
 * The header of an arm64 Linux {@code Image} (Documentation/arch/arm64/booting.rst): 64 bytes at
 * file offset 0, magic {@code "ARM\x64"} at 0x38. Debian's arm64 {@code vmlinuz} is this raw,
 * uncompressed Image (with an EFI stub, so it also starts with "MZ"); {@link KernelFiles} unpacks
 * {@code Image.gz} and EFI zboot files to this form.
 *
 * <pre>
 *   0x00 u32 code0        0x04 u32 code1
 *   0x08 u64 text_offset  0x10 u64 image_size   0x18 u64 flags
 *   0x20..0x37 reserved   0x38 u32 magic        0x3c u32 PE header offset
 * </pre>
 *
 * @param name        file the header came from (for messages)
 * @param fileSize    bytes in the file
 * @param code0       first instruction word
 * @param textOffset  image load offset from a 2 MiB aligned base
 * @param imageSize   effective image size including BSS (0 for kernels older than 3.17)
 * @param flags       bit 0 endianness (1 = big), bits 1-2 page size (1 = 4K, 2 = 16K, 3 = 64K),
 *                    bit 3 physical placement (1 = anywhere in memory)
 * @param peOffset    offset of the PE header of the EFI stub (0 if none)
 */
public record Arm64Image(String name, long fileSize, int code0, long textOffset, long imageSize, long flags, int peOffset) {
    public static final int HEADER_SIZE = 64;
    public static final int MAGIC = 0x644d5241; // "ARM\x64" little-endian

    public static Arm64Image read(Path path) throws KernelImageException {
        return parse(ImageFiles.read(path), path.toString());
    }

    public static Arm64Image parse(byte[] data, String name) throws KernelImageException {
        return parse(data, data.length, name);
    }

    /**
     * Parses the Image whose first bytes are {@code data} (the whole file, or a prefix long enough
     * for its headers) and whose file is {@code fileLength} bytes long.
     */
    public static Arm64Image parse(byte[] data, long fileLength, String name) throws KernelImageException {
        if (data.length < HEADER_SIZE) {
            throw new KernelImageException(name + ": not an arm64 Image: " + ImageFiles.describe(data) + ", shorter than the 64-byte header");
        }
        if (!ImageFiles.isArm64Image(data)) {
            throw new KernelImageException(name + ": not an arm64 Image (no \"ARM\\x64\" magic at 0x38): it is " + ImageFiles.describe(data));
        }
        ByteBuffer b = ImageFiles.le(data);
        Arm64Image img = new Arm64Image(name, fileLength, b.getInt(0), b.getLong(8), b.getLong(16), b.getLong(24), b.getInt(0x3c));
        if ((img.textOffset & 0xfff) != 0 || Long.compareUnsigned(img.textOffset, 1L << 30) >= 0) {
            throw new KernelImageException(name + ": corrupt arm64 Image header: text_offset 0x" + Long.toHexString(img.textOffset) + " is not a small page-aligned offset");
        }
        if (img.imageSize != 0 && Long.compareUnsigned(img.imageSize, img.fileSize) < 0) {
            throw new KernelImageException(name + ": corrupt arm64 Image header: image_size 0x" + Long.toHexString(img.imageSize)
                    + " is smaller than the file (0x" + Long.toHexString(img.fileSize) + " bytes)");
        }
        if ((img.flags & ~0xfL) != 0) {
            throw new KernelImageException(name + ": corrupt arm64 Image header: unknown flags 0x" + Long.toHexString(img.flags));
        }
        if (img.peOffset != 0 && (img.peOffset < 0 || img.peOffset > data.length - 4
                || !ImageFiles.startsWith(data, img.peOffset, (byte) 'P', (byte) 'E', (byte) 0, (byte) 0))) {
            throw new KernelImageException(name + ": corrupt arm64 Image: PE header offset 0x" + Integer.toHexString(img.peOffset) + " does not point at \"PE\\0\\0\"");
        }
        if (img.peOffset != 0) {
            long fileBacked = peSectionsEnd(data, fileLength, name, img.peOffset);
            if (fileBacked > fileLength) {
                throw new KernelImageException(name + ": truncated arm64 Image: its PE sections end at 0x" + Long.toHexString(fileBacked)
                        + ", the file has 0x" + Long.toHexString(fileLength) + " bytes");
            }
        }
        return img;
    }

    /**
     * The end of the file-backed part of an Image with an EFI stub: the largest
     * PointerToRawData + SizeOfRawData of its PE sections. image_size cannot say this, as it
     * counts BSS; the PE sections do (for Debian 12, 13 and unstable's arm64 Images this is
     * exactly the file's length).
     */
    static long peSectionsEnd(byte[] data, String name, int pe) throws KernelImageException {
        return peSectionsEnd(data, data.length, name, pe);
    }

    static long peSectionsEnd(byte[] data, long fileLength, String name, int pe) throws KernelImageException {
        ByteBuffer b = ImageFiles.le(data);
        if (pe + 24 > data.length) throw new KernelImageException(name + ": truncated arm64 Image: the PE header is cut off");
        int sections = b.getShort(pe + 6) & 0xffff, optionalHeader = b.getShort(pe + 20) & 0xffff;
        long table = pe + 24L + optionalHeader;
        if (table + 40L * sections > fileLength) {
            throw new KernelImageException(name + ": truncated arm64 Image: the PE section table ends past the file's 0x" + Long.toHexString(fileLength) + " bytes");
        }
        if (table + 40L * sections > data.length) {
            throw new KernelImageException(name + ": the PE section table lies past the first 0x" + Long.toHexString(data.length) + " bytes read for the headers");
        }
        long end = 0;
        for (int i = 0; i < sections; i++) {
            int s = (int) (table + 40L * i);
            long rawSize = b.getInt(s + 16) & 0xffffffffL, rawPointer = b.getInt(s + 20) & 0xffffffffL;
            if (rawSize != 0) end = Math.max(end, rawPointer + rawSize);
        }
        return end;
    }

    public boolean bigEndian() { return (flags & 1) != 0; }

    /** Kernel page size in bytes, or 0 when the header leaves it unspecified. */
    public int pageSize() {
        return switch ((int) (flags >> 1) & 3) {
            case 1 -> 4096;
            case 2 -> 16384;
            case 3 -> 65536;
            default -> 0;
        };
    }

    /** Bit 3: the image may be placed anywhere in physical memory (else close to the start of DRAM). */
    public boolean physicalPlacementAnywhere() { return (flags & 8) != 0; }

    /** True when the Image carries an EFI stub ("MZ" at 0 and a PE header). */
    public boolean hasEfiStub() { return peOffset != 0; }

    /** Bytes the loaded kernel occupies (image_size, or the file size for pre-3.17 kernels). */
    public long effectiveSize() { return imageSize != 0 ? imageSize : fileSize; }

    /**
     * Physical load address for a kernel put as low as allowed in RAM starting at {@code ramBase}:
     * a 2 MiB aligned base plus text_offset.
     */
    public long loadAddress(long ramBase) {
        long base = (ramBase + 0x1fffffL) & ~0x1fffffL;
        return base + textOffset;
    }
}
