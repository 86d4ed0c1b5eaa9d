package dev.kpemu.image;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Random;

/**
 * Small kernel files built in the tests around real compressed payloads: an ELF "vmlinux" of
 * compressible bytes, a bzImage setup header, an arm64 Image header with an EFI stub's PE
 * sections, and an EFI zboot header. Only the fields kpemu reads are filled in.
 */
final class SyntheticKernels {
    private SyntheticKernels() {}

    static ByteBuffer le(byte[] d) { return ByteBuffer.wrap(d).order(ByteOrder.LITTLE_ENDIAN); }

    /** {@code size} bytes starting with an ELF magic, then text-like, compressible but not trivial. */
    static byte[] vmlinux(int size, long seed) {
        byte[] d = new byte[size];
        String[] words = {"mov", "push", "ret", "call", "sched_tick", "do_sys_open", "\0\0\0\0\0\0\0\0", "kprobe", "0x", "\n"};
        Random r = new Random(seed);
        int p = 0;
        while (p < size) {
            byte[] w = r.nextInt(8) == 0 ? new byte[]{(byte) r.nextInt()} : words[r.nextInt(words.length)].getBytes(StandardCharsets.ISO_8859_1);
            int n = Math.min(w.length, size - p);
            System.arraycopy(w, 0, d, p, n);
            p += n;
        }
        System.arraycopy(new byte[]{0x7f, 'E', 'L', 'F', 2, 1, 1}, 0, d, 0, 7);
        return d;
    }

    static final int SETUP_SECTS = 1, SETUP_SIZE = (SETUP_SECTS + 1) * 512, PAYLOAD_AT = 0x100;

    /**
     * A bzImage (boot protocol 2.15) whose protected-mode part holds {@code payload} (the
     * compressed stream followed by whatever Linux puts after it) at payload_offset 0x100.
     */
    static byte[] bzImage(byte[] payload) {
        int pm = PAYLOAD_AT + payload.length + 0x40;
        byte[] d = new byte[SETUP_SIZE + pm];
        ByteBuffer b = le(d);
        d[0x1f1] = SETUP_SECTS;
        b.putInt(0x1f4, (pm + 15) / 16);                 // syssize, 16-byte units
        b.putShort(0x1fe, (short) 0xaa55);
        b.put(0x202, "HdrS".getBytes(StandardCharsets.US_ASCII));
        b.putShort(0x206, (short) 0x020f);
        d[0x211] = 1;                                    // LOADED_HIGH
        b.putInt(0x214, 0x100000);
        b.putInt(0x230, 0x200000);
        d[0x234] = 1;
        b.putShort(0x236, (short) 1);                    // XLF_KERNEL_64
        b.putInt(0x248, PAYLOAD_AT);
        b.putInt(0x24c, payload.length);
        b.putLong(0x258, 0x1000000);
        b.putInt(0x260, 0x4000000);
        System.arraycopy(payload, 0, d, SETUP_SIZE + PAYLOAD_AT, payload.length);
        return d;
    }

    /** {@code stream} followed by the 4-byte LE size Linux appends (size_append). */
    static byte[] withSize(byte[] stream, int size) {
        byte[] d = java.util.Arrays.copyOf(stream, stream.length + 4);
        le(d).putInt(stream.length, size);
        return d;
    }

    static final int PE_AT = 0x40, TEXT_AT = 0x1000;

    /**
     * An arm64 Image of {@code fileSize} bytes with an EFI stub: header, "PE\0\0" at 0x40 and two
     * PE sections whose raw data ends at the end of the file; image_size adds {@code bss}.
     */
    static byte[] arm64Image(int fileSize, int bss, long seed) {
        byte[] d = vmlinux(fileSize, seed);
        java.util.Arrays.fill(d, 0, TEXT_AT, (byte) 0);
        ByteBuffer b = le(d);
        d[0] = 'M'; d[1] = 'Z';
        b.putLong(8, 0);                                 // text_offset
        b.putLong(16, fileSize + bss);                   // image_size
        b.putLong(24, 0xa);                              // LE, 4K pages, anywhere
        b.putInt(0x38, Arm64Image.MAGIC);
        b.putInt(0x3c, PE_AT);
        b.putInt(PE_AT, 0x00004550);                     // "PE\0\0"
        b.putShort(PE_AT + 4, (short) 0xaa64);
        b.putShort(PE_AT + 6, (short) 2);                // sections
        b.putShort(PE_AT + 20, (short) 0);               // no optional header: the table follows
        int table = PE_AT + 24, split = TEXT_AT + (fileSize - TEXT_AT) / 2;
        section(b, table, ".text", TEXT_AT, split - TEXT_AT);
        section(b, table + 40, ".data", split, fileSize - split);
        return d;
    }

    private static void section(ByteBuffer b, int at, String name, int rawPointer, int rawSize) {
        b.put(at, java.util.Arrays.copyOf(name.getBytes(StandardCharsets.US_ASCII), 8));
        b.putInt(at + 8, rawSize);
        b.putInt(at + 12, rawPointer);
        b.putInt(at + 16, rawSize);
        b.putInt(at + 20, rawPointer);
    }

    /** The Image padded with zeros to its image_size, as Linux's zboot build does before compressing. */
    static byte[] padToImageSize(byte[] image) {
        return java.util.Arrays.copyOf(image, (int) le(image).getLong(16));
    }

    static final int ZBOOT_PAYLOAD_AT = 0x200;

    /**
     * An EFI zboot file: "MZ", "zimg", payload offset and size, the compression type string;
     * then {@code gzdata} (the compressed Image, plus the appended size except for gzip) of which
     * the header counts {@code payloadSize} bytes; then some stub code.
     */
    static byte[] zboot(byte[] gzdata, int payloadSize, String type) {
        byte[] d = new byte[ZBOOT_PAYLOAD_AT + gzdata.length + 0x100];
        ByteBuffer b = le(d);
        d[0] = 'M'; d[1] = 'Z';
        b.put(4, "zimg".getBytes(StandardCharsets.US_ASCII));
        b.putInt(8, ZBOOT_PAYLOAD_AT);
        b.putInt(12, payloadSize);
        b.put(0x18, type.getBytes(StandardCharsets.US_ASCII));
        b.putInt(0x38, 0x818223cd);                      // LINUX_PE_MAGIC
        System.arraycopy(gzdata, 0, d, ZBOOT_PAYLOAD_AT, gzdata.length);
        return d;
    }
}
