package dev.kpemu.image;

import java.nio.ByteBuffer;
import java.nio.file.Path;

/**
 * An x86 bzImage: the real-mode setup (with the setup header at 0x1f1, "HdrS" at 0x202,
 * Documentation/arch/x86/boot.rst) followed by the protected-mode decompressor, which carries the
 * compressed vmlinux as its payload, followed by a 4-byte little-endian decompressed-size
 * trailer. The payload may use any compression Linux offers ({@link Compression}): Debian 12
 * uses XZ, Debian 13 and later zstd.
 */
public final class BzImage {
    private final String name;
    private final byte[] data;
    private final int setupSects;
    private final int bootFlag;
    private final int version;
    private final int loadflags;
    private final long code32Start;
    private final long initrdAddrMax;
    private final long kernelAlignment;
    private final boolean relocatable;
    private final int minAlignment;
    private final int xloadflags;
    private final long cmdlineSize;
    private final long payloadOffset;
    private final long payloadLength;
    private final long prefAddress;
    private final long initSize;
    private final long handoverOffset;
    private final long syssize;

    private BzImage(String name, byte[] data) throws KernelImageException {
        this.name = name;
        this.data = data;
        ByteBuffer b = ImageFiles.le(data);
        setupSects = data[0x1f1] & 0xff;
        syssize = b.getInt(0x1f4) & 0xffffffffL;
        bootFlag = b.getShort(0x1fe) & 0xffff;
        version = b.getShort(0x206) & 0xffff;
        loadflags = data[0x211] & 0xff;
        code32Start = b.getInt(0x214) & 0xffffffffL;
        initrdAddrMax = version >= 0x203 ? b.getInt(0x22c) & 0xffffffffL : 0x37ffffffL;
        kernelAlignment = version >= 0x205 ? b.getInt(0x230) & 0xffffffffL : 0;
        relocatable = version >= 0x205 && data[0x234] != 0;
        minAlignment = version >= 0x20a ? data[0x235] & 0xff : 0;
        xloadflags = version >= 0x20c ? b.getShort(0x236) & 0xffff : 0;
        cmdlineSize = version >= 0x206 ? b.getInt(0x238) & 0xffffffffL : 255;
        payloadOffset = version >= 0x208 ? b.getInt(0x248) & 0xffffffffL : 0;
        payloadLength = version >= 0x208 ? b.getInt(0x24c) & 0xffffffffL : 0;
        prefAddress = version >= 0x20a ? b.getLong(0x258) : 0x100000;
        initSize = version >= 0x20a ? b.getInt(0x260) & 0xffffffffL : 0;
        handoverOffset = version >= 0x20b ? b.getInt(0x264) & 0xffffffffL : 0;
    }

    public static BzImage read(Path path) throws KernelImageException {
        return parse(ImageFiles.read(path), path.toString());
    }

    public static BzImage parse(byte[] data, String name) throws KernelImageException {
        if (data.length < 0x270 || !ImageFiles.isBzImage(data)) {
            throw new KernelImageException(name + ": not an x86 bzImage (no \"HdrS\" setup header at 0x202): it is " + ImageFiles.describe(data));
        }
        BzImage img = new BzImage(name, data);
        if (img.bootFlag != 0xaa55) {
            throw new KernelImageException(name + ": corrupt bzImage: boot_flag is 0x" + Integer.toHexString(img.bootFlag) + ", expected 0xaa55");
        }
        if (img.version < 0x208) {
            throw new KernelImageException(name + ": bzImage boot protocol " + img.protocolString() + " is too old (need 2.08+ for payload_offset)");
        }
        if ((img.loadflags & 1) == 0) {
            throw new KernelImageException(name + ": a zImage (LOADED_HIGH clear), not a bzImage");
        }
        long start = img.payloadFileOffset();
        if (img.payloadLength < 6 || start + img.payloadLength > data.length) {
            throw new KernelImageException(name + ": corrupt bzImage: payload at 0x" + Long.toHexString(start) + " length 0x"
                    + Long.toHexString(img.payloadLength) + " lies outside the " + data.length + "-byte file");
        }
        if (img.setupSize() + img.syssize * 16 > data.length + 16) {
            throw new KernelImageException(name + ": corrupt bzImage: truncated (syssize says 0x" + Long.toHexString(img.syssize * 16)
                    + " protected-mode bytes, file has 0x" + Long.toHexString(data.length - img.setupSize()) + ")");
        }
        return img;
    }

    public String name() { return name; }
    public int setupSects() { return setupSects; }
    /** Boot protocol version, e.g. 0x020f for 2.15. */
    public int protocolVersion() { return version; }
    public String protocolString() { return (version >> 8) + "." + String.format("%02d", version & 0xff); }
    public int loadflags() { return loadflags; }
    public long code32Start() { return code32Start; }
    public long initrdAddrMax() { return initrdAddrMax; }
    public long kernelAlignment() { return kernelAlignment; }
    public boolean relocatable() { return relocatable; }
    public int minAlignment() { return minAlignment; }
    /** XLF_KERNEL_64 (1), XLF_CAN_BE_LOADED_ABOVE_4G (2), XLF_EFI_HANDOVER_32/64 (4, 8), XLF_EFI_KEXEC (0x10), ... */
    public int xloadflags() { return xloadflags; }
    public boolean has64BitEntry() { return (xloadflags & 1) != 0; }
    public long cmdlineSize() { return cmdlineSize; }
    public long payloadOffset() { return payloadOffset; }
    public long payloadLength() { return payloadLength; }
    public long prefAddress() { return prefAddress; }
    public long initSize() { return initSize; }
    public long handoverOffset() { return handoverOffset; }
    public long fileSize() { return data.length; }

    /** Bytes of real-mode setup code (including the boot sector): (setup_sects + 1) * 512. */
    public int setupSize() { return ((setupSects == 0 ? 4 : setupSects) + 1) * 512; }

    /** File offset of the protected-mode code (what gets loaded at code32_start / pref_address). */
    public int protectedModeOffset() { return setupSize(); }

    public long payloadFileOffset() { return setupSize() + payloadOffset; }

    /** The real-mode setup bytes (boot sector + setup code + setup header). */
    public byte[] setupBytes() { return java.util.Arrays.copyOfRange(data, 0, Math.min(setupSize(), data.length)); }

    /** The protected-mode kernel (decompressor + compressed payload). */
    public byte[] protectedModeBytes() { return java.util.Arrays.copyOfRange(data, setupSize(), data.length); }

    public byte[] payload() {
        int start = (int) payloadFileOffset();
        return java.util.Arrays.copyOfRange(data, start, start + (int) payloadLength);
    }

    /** How the payload is compressed (by its magic), or null when no known compression matches. */
    public Compression compression() { return Compression.detect(data, (int) payloadFileOffset()); }

    /** "xz", "gzip", "zstd", "lzma", "bzip2", "lz4", "lzo" or "unknown". */
    public String payloadCompression() {
        Compression c = compression();
        return c == null ? "unknown" : c.toolName();
    }

    /** The decompressed size announced by the 4-byte trailer at the end of the payload. */
    public long trailerSize() {
        int end = (int) (payloadFileOffset() + payloadLength);
        return ImageFiles.le(data).getInt(end - 4) & 0xffffffffL;
    }

    /**
     * Decompresses the payload to the ELF vmlinux; every compression Linux offers is understood.
     * The payload's last 4 bytes give the decompressed size (gzip's own size field; appended
     * after the stream for the others), and the result must have exactly that size.
     */
    public byte[] extractVmlinux() throws KernelImageException {
        Compression c = compression();
        if (c == null) {
            throw new KernelImageException(name + ": bzImage payload has no known compression magic (first bytes "
                    + java.util.HexFormat.of().formatHex(data, (int) payloadFileOffset(), (int) payloadFileOffset() + 4) + ")");
        }
        int streamLength = (int) payloadLength - (c == Compression.GZIP ? 0 : 4);
        byte[] out = c.decompress(data, (int) payloadFileOffset(), streamLength, trailerSize(), name);
        if (!ImageFiles.isElf(out)) {
            throw new KernelImageException(name + ": bzImage payload (" + c.toolName() + ") does not decompress to an ELF vmlinux");
        }
        return out;
    }

    /** Decompresses and parses the payload. */
    public ElfImage vmlinux() throws KernelImageException {
        return ElfImage.parse(extractVmlinux(), name + "!vmlinux");
    }

    @Override
    public String toString() {
        return String.format("bzImage[%s protocol %s setup_sects %d payload %s @0x%x+0x%x pref 0x%x init_size 0x%x align 0x%x xloadflags 0x%x]",
                name, protocolString(), setupSects, payloadCompression(), payloadFileOffset(), payloadLength, prefAddress, initSize, kernelAlignment, xloadflags);
    }
}
