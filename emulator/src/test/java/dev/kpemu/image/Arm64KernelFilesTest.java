package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * arm64 kernels as shipped: a raw Image, an {@code Image.gz} made by Debian's gzip, and EFI zboot
 * files around payloads made by Debian's tools, all unpack to the raw Image; truncated ones are
 * refused in one line.
 */
class Arm64KernelFilesTest {
    static final int FILE_SIZE = 1 << 20, BSS = 0x30000;
    static final byte[] IMAGE = SyntheticKernels.arm64Image(FILE_SIZE, BSS, 3);

    @Test
    void aRawImageIsUsedAsIs() throws Exception {
        assertSame(IMAGE, KernelFiles.arm64Image(IMAGE, "Image"));
        Arm64Image h = Arm64Image.parse(IMAGE, "Image");
        assertEquals(FILE_SIZE + BSS, h.imageSize());
        assertEquals(FILE_SIZE, Arm64Image.peSectionsEnd(IMAGE, "Image", SyntheticKernels.PE_AT));
    }

    @Test
    void imageGzUnpacks(@TempDir Path tmp) throws Exception {
        byte[] gz = CompressionTools.compress(Compression.GZIP, IMAGE);   // what `make Image.gz` does: gzip -n -f -9
        assertArrayEquals(IMAGE, KernelFiles.arm64Image(gz, "Image.gz"));
        Path f = tmp.resolve("Image.gz");
        Files.write(f, gz);
        assertArrayEquals(IMAGE, KernelFiles.readArm64Image(f));
        assertTrue(KernelFiles.isArm64Kernel(gz));
    }

    /** The compressions Linux's Makefile.zboot offers, with the type string it writes. */
    static String zbootType(Compression c) {
        return switch (c) {
            case XZ -> "xzkern";
            case ZSTD -> "zstd22";
            default -> c.toolName();
        };
    }

    /** A zboot file as Linux's build makes it: the Image padded to image_size, compressed, size appended except for gzip. */
    static byte[] zboot(Compression c, byte[] image) throws Exception {
        byte[] padded = SyntheticKernels.padToImageSize(image);
        byte[] stream = CompressionTools.compress(c, padded);
        byte[] gzdata = c == Compression.GZIP ? stream : SyntheticKernels.withSize(stream, padded.length);
        return SyntheticKernels.zboot(gzdata, stream.length, zbootType(c));
    }

    @ParameterizedTest
    @EnumSource(value = Compression.class, names = {"GZIP", "LZ4", "LZMA", "LZO", "XZ", "ZSTD"})
    void zbootUnpacksToThePaddedImage(Compression c) throws Exception {
        byte[] file = zboot(c, IMAGE);
        ZbootImage z = ZbootImage.parse(file, "vmlinuz.efi");
        assertEquals(zbootType(c), z.compressionType());
        assertEquals(c, z.compression(file));
        assertEquals(SyntheticKernels.ZBOOT_PAYLOAD_AT, z.payloadOffset());
        byte[] image = KernelFiles.arm64Image(file, "vmlinuz.efi");
        assertArrayEquals(SyntheticKernels.padToImageSize(IMAGE), image);
        assertArrayEquals(IMAGE, Arrays.copyOf(image, IMAGE.length));
        assertEquals(FILE_SIZE + BSS, Arm64Image.parse(image, "vmlinuz.efi").imageSize());
        assertEquals("an EFI zboot image", ImageFiles.describe(file));
    }

    @Test
    void aTruncatedImageIsRefused() throws Exception {
        byte[] cut = Arrays.copyOf(IMAGE, FILE_SIZE - 0x200);
        String m = assertThrows(KernelImageException.class, () -> Arm64Image.parse(cut, "Image")).getMessage();
        assertEquals("Image: truncated arm64 Image: its PE sections end at 0x" + Integer.toHexString(FILE_SIZE)
                + ", the file has 0x" + Integer.toHexString(FILE_SIZE - 0x200) + " bytes", m);
        byte[] headerOnly = Arrays.copyOf(IMAGE, 0x60);
        m = assertThrows(KernelImageException.class, () -> Arm64Image.parse(headerOnly, "Image")).getMessage();
        assertTrue(m.startsWith("Image: truncated arm64 Image: the PE"), m);
    }

    @Test
    void aTruncatedImageGzIsRefused() throws Exception {
        byte[] gz = CompressionTools.compress(Compression.GZIP, IMAGE);
        byte[] cut = Arrays.copyOf(gz, gz.length / 2);
        String m = assertThrows(KernelImageException.class, () -> KernelFiles.arm64Image(cut, "Image.gz")).getMessage();
        assertTrue(m.startsWith("Image.gz: truncated gzip payload"), m);
    }

    @Test
    void aTruncatedZbootIsRefused() throws Exception {
        byte[] file = zboot(Compression.ZSTD, IMAGE);
        // the file ends inside the payload the header describes
        byte[] cut = Arrays.copyOf(file, SyntheticKernels.ZBOOT_PAYLOAD_AT + 100);
        String m = assertThrows(KernelImageException.class, () -> KernelFiles.arm64Image(cut, "vmlinuz.efi")).getMessage();
        assertTrue(m.startsWith("vmlinuz.efi: truncated or corrupt EFI zboot image: payload at 0x200+0x"), m);
        // the header is consistent but the compressed data ends early
        byte[] padded = SyntheticKernels.padToImageSize(IMAGE);
        byte[] stream = CompressionTools.compress(Compression.ZSTD, padded);
        byte[] early = Arrays.copyOf(stream, stream.length / 2);
        byte[] shortened = SyntheticKernels.zboot(SyntheticKernels.withSize(early, padded.length), early.length, "zstd22");
        m = assertThrows(KernelImageException.class, () -> KernelFiles.arm64Image(shortened, "vmlinuz.efi")).getMessage();
        assertTrue(m.startsWith("vmlinuz.efi: truncated zstd payload") || m.startsWith("vmlinuz.efi: corrupt or truncated zstd payload"), m);
        assertFalse(m.contains("\n"), m);
    }

    @Test
    void aCompressedFileThatIsNotAnImageIsRefused() throws Exception {
        byte[] elf = SyntheticKernels.vmlinux(4096, 4);
        byte[] gz = CompressionTools.compress(Compression.GZIP, elf);
        String m = assertThrows(KernelImageException.class, () -> KernelFiles.arm64Image(gz, "x.gz")).getMessage();
        assertTrue(m.startsWith("x.gz: the gzip-compressed file holds an ELF file"), m);
        // a file of another kind passes through to the header check and its existing message
        byte[] random = new byte[4096];
        assertSame(random, KernelFiles.arm64Image(random, "r"));
        m = assertThrows(KernelImageException.class, () -> Arm64Image.parse(random, "r")).getMessage();
        assertTrue(m.contains("not an arm64 Image"), m);
    }

    @Test
    void anElfWhoseSegmentsLieBeyondTheFileIsRefused() {
        byte[] elf = new byte[0x100];
        var b = SyntheticKernels.le(elf);
        b.put(0, new byte[]{0x7f, 'E', 'L', 'F', 2, 1, 1});
        b.putShort(16, (short) 2);
        b.putShort(18, (short) ElfImage.EM_X86_64);
        b.putLong(32, 64);                                   // e_phoff
        b.putShort(54, (short) 56);
        b.putShort(56, (short) 1);
        b.putInt(64, 1);                                     // PT_LOAD
        b.putLong(64 + 8, 0x80);                             // p_offset
        b.putLong(64 + 32, 0x1000);                          // p_filesz past the 0x100-byte file
        b.putLong(64 + 40, 0x1000);
        String m = assertThrows(KernelImageException.class, () -> ElfImage.parse(elf, "vmlinux")).getMessage();
        assertTrue(m.startsWith("vmlinux: corrupt ELF: segment 0") && m.contains("lies outside the 256-byte file"), m);
    }
}
