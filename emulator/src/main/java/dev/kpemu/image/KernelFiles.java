package dev.kpemu.image;

import java.nio.file.Path;

/**
 * Turns a kernel file as shipped into what kpemu loads and reads symbols from: for arm64 the
 * raw {@code Image} (from an {@code Image}, a compressed {@code Image.gz}/{@code Image.zst}/...,
 * or an EFI zboot {@code vmlinuz.efi}); for x86 the ELF vmlinux (from a bzImage or a vmlinux).
 */
public final class KernelFiles {
    private KernelFiles() {}

    /** Reads {@code path} and returns the raw arm64 Image it holds. */
    public static byte[] readArm64Image(Path path) throws KernelImageException {
        return arm64Image(ImageFiles.read(path), path.toString());
    }

    /**
     * The raw arm64 Image in {@code file}: the file itself when it is one, else its decompressed
     * payload. A file that is none of these is returned as is, for {@link Arm64Image#parse} to
     * say what it is.
     */
    public static byte[] arm64Image(byte[] file, String name) throws KernelImageException {
        if (ImageFiles.isArm64Image(file)) return file;
        byte[] image;
        String from;
        if (ZbootImage.isZboot(file)) {
            ZbootImage z = ZbootImage.parse(file, name);
            image = z.decompress(file);
            from = "EFI zboot payload (" + z.compression(file).toolName() + ")";
        } else {
            Compression c = Compression.detect(file, 0);
            if (c == null) return file;
            image = c.decompress(file, 0, file.length, -1, name);
            from = c.toolName() + "-compressed file";
        }
        if (!ImageFiles.isArm64Image(image)) {
            throw new KernelImageException(name + ": the " + from + " holds " + ImageFiles.describe(image) + ", not an arm64 Image");
        }
        return image;
    }

    /**
     * The raw arm64 Image of the kernel file at {@code file}: the file itself, not read yet, when it
     * is one (Debian's arm64 {@code vmlinuz}); else its payload, decompressed in memory.
     */
    public static OnDemandFileBytes arm64Image(java.nio.file.Path file) throws KernelImageException {
        long size = -1;
        try {
            size = java.nio.file.Files.size(file);
        } catch (java.io.IOException e) {
            // read it whole below, for the one-line error
        }
        if (size >= 64) {
            OnDemandFileBytes f = OnDemandFileBytes.of(file, size);
            if (ImageFiles.isArm64Image(f.head(64))) return f;
        }
        return OnDemandFileBytes.inMemory(arm64Image(ImageFiles.read(file), file.toString()), file.toString());
    }

    /** True when {@code file} is an arm64 kernel in any of the forms {@link #arm64Image} unpacks. */
    public static boolean isArm64Kernel(byte[] file) {
        return ImageFiles.isArm64Image(file) || ZbootImage.isZboot(file) || Compression.detect(file, 0) != null;
    }

    /** The ELF vmlinux in {@code file}: the file itself, or a bzImage's decompressed payload. */
    public static byte[] x86Vmlinux(byte[] file, String name) throws KernelImageException {
        if (ImageFiles.isElf(file)) return file;
        return BzImage.parse(file, name).extractVmlinux();
    }
}
