package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The kallsyms decoder on tables built here in the 6.1 layout, inside a fake arm64 Image. */
class KallsymsSyntheticTest {
    static final int N = 5000;
    static final long REL_BASE = 0xffff800008010000L;

    /** Token slot i holds the character i when printable, else a two-character token. */
    static String token(int i) { return i >= 0x21 && i <= 0x7e ? String.valueOf((char) i) : "_" + (char) ('a' + i % 26); }

    static String name(int i) { return i == 0 ? "_stext" : i == N - 1 ? "_etext" : "fn_" + Integer.toString(i * 7919, 36) + (i % 3 == 0 ? "_long_name" : ""); }

    static long offset(int i) { return 0x10L * i + (i > 2500 ? 0x1000 : 0); }

    static void align(ByteArrayOutputStream o, int a) { while (o.size() % a != 0) o.write(0); }
    static void u32(ByteArrayOutputStream o, long v) { for (int k = 0; k < 4; k++) o.write((int) (v >> (8 * k))); }
    static void u64(ByteArrayOutputStream o, long v) { for (int k = 0; k < 8; k++) o.write((int) (v >> (8 * k))); }

    /** Where scripts/kallsyms.c puts kallsyms_offsets and how it encodes them. */
    enum Layout { BEFORE_NUM_SYMS_6_1, AFTER_TOKEN_INDEX_6_4, PC_RELATIVE_7 }

    static final long LINK_BASE = REL_BASE - 0x10000;

    static byte[] image() { return image(Layout.BEFORE_NUM_SYMS_6_1); }

    static void offsetsAndBase(ByteArrayOutputStream o, Layout layout) {
        if (layout == Layout.PC_RELATIVE_7) {
            for (int i = 0; i < N; i++) u32(o, (0x10000 + offset(i)) - o.size());   // symbol file offset - entry's
            return;
        }
        align(o, 8);
        for (int i = 0; i < N; i++) u32(o, offset(i));                 // kallsyms_offsets
        align(o, 8);
        u64(o, REL_BASE);                                              // kallsyms_relative_base
    }

    static byte[] image(Layout layout) {
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        // arm64 Image header: code0, code1, text_offset 0, image_size, flags 0xa, res, magic, PE offset 0
        u32(o, 0x91005a4d); u32(o, 0x14000000); u64(o, 0); u64(o, 0); u64(o, 0xa); u64(o, 0); u64(o, 0); u64(o, 0);
        u32(o, Arm64Image.MAGIC); u32(o, 0);
        Random r = new Random(1);
        byte[] junk = new byte[70_000];
        r.nextBytes(junk);
        o.writeBytes(junk);
        align(o, 8);
        for (int j = 0; j < 64; j++) u64(o, REL_BASE + offset(j * 70)); // pointers to symbols (an ops table)
        if (layout == Layout.BEFORE_NUM_SYMS_6_1) offsetsAndBase(o, layout);
        u32(o, N);                                                     // kallsyms_num_syms
        align(o, 8);
        int names = o.size();
        long[] markers = new long[(N + 255) / 256];
        for (int i = 0; i < N; i++) {                                  // kallsyms_names
            if (i % 256 == 0) markers[i / 256] = o.size() - names;
            byte[] s = ((i % 5 == 0 ? "t" : "T") + name(i)).getBytes(StandardCharsets.US_ASCII);
            o.write(s.length);
            o.writeBytes(s);                                           // slot == character
        }
        align(o, 8);
        for (long m : markers) u32(o, m);                              // kallsyms_markers
        align(o, 8);
        byte[] seqs = new byte[3 * N];                                 // kallsyms_seqs_of_names
        r.nextBytes(seqs);
        o.writeBytes(seqs);
        align(o, 8);
        int table = o.size();
        int[] index = new int[256];
        for (int i = 0; i < 256; i++) {                                // kallsyms_token_table
            index[i] = o.size() - table;
            o.writeBytes(token(i).getBytes(StandardCharsets.US_ASCII));
            o.write(0);
        }
        align(o, 8);
        for (int v : index) { o.write(v); o.write(v >> 8); }           // kallsyms_token_index
        if (layout != Layout.BEFORE_NUM_SYMS_6_1) offsetsAndBase(o, layout);
        o.writeBytes("trailing rodata\0".getBytes(StandardCharsets.US_ASCII));
        align(o, 8);
        byte[] img = o.toByteArray();
        ByteBuffer.wrap(img).order(ByteOrder.LITTLE_ENDIAN).putLong(16, img.length + 0x10000L);
        return img;
    }

    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.EnumSource(Layout.class)
    void decodesSyntheticTables(Layout layout) throws Exception {
        byte[] img = image(layout);
        assertEquals(layout == Layout.PC_RELATIVE_7 ? Kallsyms.OffsetsEncoding.PC_RELATIVE : Kallsyms.OffsetsEncoding.BASE_RELATIVE,
                Kallsyms.locate(img, "synthetic").encoding());
        SymbolTable t = Kallsyms.fromArm64Image(img, "synthetic");
        assertEquals(N, t.size());
        for (int i : new int[]{0, 1, 255, 256, 2500, 2501, N - 1}) {
            Symbol s = t.symbols().get(i);
            assertEquals(name(i), s.name());
            assertEquals(REL_BASE + offset(i), s.address());
            assertEquals(i % 5 == 0 ? 't' : 'T', s.type());
        }
        assertEquals(0x10, t.byName(name(7)).orElseThrow().size());
        assertEquals(0x1010, t.byName(name(2500)).orElseThrow().size());
        assertEquals(0xffff800008000000L, t.linkBase());
        assertEquals(0x10000 + 0x10L * 7, t.fileOffset(t.address(name(7))).getAsLong());
        assertEquals(name(7) + "+0x4/0x10", t.format(REL_BASE + 0x10L * 7 + 4));
        assertTrue(t.lookup(REL_BASE - 1).isEmpty());
    }

    /**
     * A relocatable Image: the relative_base slot holds 0 and R_AARCH64_RELATIVE entries supply it.
     * A second entry 2 MiB from the slot passes the same test (as in a small kernel built from
     * source); the link base that keeps every relocation target inside the Image is the right one.
     */
    @Test
    void relocatableImageWithADecoyRelocation() throws Exception {
        byte[] plain = image(Layout.AFTER_TOKEN_INDEX_6_4);
        int slot = Kallsyms.locate(plain, "synthetic").relativeBaseAt();
        long mib2 = 0x200000L;
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        o.writeBytes(plain);
        align(o, 8);
        for (int j = 0; j < 20; j++) { u64(o, LINK_BASE + 0x20000 + 8L * j); u64(o, 1027); u64(o, REL_BASE + offset(j)); }
        u64(o, LINK_BASE + mib2 + slot); u64(o, 1027); u64(o, LINK_BASE + mib2 + 0x1234);   // the decoy
        u64(o, LINK_BASE + slot); u64(o, 1027); u64(o, REL_BASE);                            // the slot's
        byte[] img = o.toByteArray();
        ByteBuffer b = ByteBuffer.wrap(img).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(slot, 0);
        b.putLong(16, 4 * mib2);   // image_size: room for the decoy's target
        SymbolTable t = Kallsyms.fromArm64Image(img, "relocatable");
        assertEquals(LINK_BASE, t.linkBase());
        assertEquals(REL_BASE + offset(7), t.address(name(7)));
        assertEquals(N, t.size());
    }

    @Test
    void corruptTablesAreReported() throws Exception {
        byte[] img = image();
        Kallsyms.Layout l = Kallsyms.locate(img, "synthetic");
        byte[] bad = img.clone();
        bad[l.names()] = (byte) 0x7f;   // a wrong length for the first name breaks the name/marker agreement
        String m = assertThrows(KernelImageException.class, () -> Kallsyms.fromArm64Image(bad, "bad")).getMessage();
        assertTrue(m.startsWith("bad: kallsyms not understood: no kallsyms_num_syms/kallsyms_names agreeing"), m);
        byte[] bad2 = img.clone();
        ByteBuffer.wrap(bad2).order(ByteOrder.LITTLE_ENDIAN).putInt(l.offsets() + 4 * 1000, 0x7fffffff);
        m = assertThrows(KernelImageException.class, () -> Kallsyms.fromArm64Image(bad2, "bad2")).getMessage();
        assertTrue(m.contains("no kallsyms_offsets holding 5000 ascending addresses"), m);
        byte[] noTables = java.util.Arrays.copyOf(img, l.tokenTable());
        m = assertThrows(KernelImageException.class, () -> Kallsyms.fromArm64Image(noTables, "none")).getMessage();
        assertTrue(m.contains("no kallsyms tables found") && m.contains("without CONFIG_KALLSYMS"), m);
    }
}
