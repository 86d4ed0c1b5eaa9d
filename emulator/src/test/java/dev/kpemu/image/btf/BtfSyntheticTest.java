package dev.kpemu.image.btf;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * A small BTF blob spelled out word by word from Documentation/bpf/btf.rst: header, one record of
 * every kind, a typedef/const/volatile chain, bitfields in both encodings (kind_flag and the old
 * INT-encoded one), an anonymous union, a forward type reference; and corrupted copies of it.
 */
class BtfSyntheticTest {
    // kinds
    static final int INT = 1, PTR = 2, ARRAY = 3, STRUCT = 4, UNION = 5, ENUM = 6, FWD = 7, TYPEDEF = 8, VOLATILE = 9,
            CONST = 10, RESTRICT = 11, FUNC = 12, FUNC_PROTO = 13, VAR = 14, DATASEC = 15, FLOAT = 16, DECL_TAG = 17,
            TYPE_TAG = 18, ENUM64 = 19;

    /** Collects the string section; {@link #s} returns a name's offset. */
    static final class Strings {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        Strings() { out.write(0); }
        int s(String name) {
            int off = out.size();
            out.writeBytes(name.getBytes(StandardCharsets.UTF_8));
            out.write(0);
            return off;
        }
    }

    static int info(int kind, boolean kflag, int vlen) { return (kflag ? 0x80000000 : 0) | kind << 24 | vlen; }

    /** Type section words and the string section of the test blob. */
    static List<int[]> records(Strings st) {
        List<int[]> r = new ArrayList<>();
        int sInt = st.s("int"), sChar = st.s("char"), sU32 = st.s("u32"), sMyInt = st.s("my_int"), sUint = st.s("unsigned int");
        // [1] int: INT size 4, encoding SIGNED (bits 24..27), offset 0, 32 bits
        r.add(new int[]{sInt, info(INT, false, 0), 4, 0x01000020});
        // [2] char: INT size 1, encoding CHAR|SIGNED, 8 bits
        r.add(new int[]{sChar, info(INT, false, 0), 1, 0x03000008});
        // [3] typedef u32 -> [9] (a forward reference)
        r.add(new int[]{sU32, info(TYPEDEF, false, 0), 9});
        // [4] const -> [3]; [5] volatile -> [4]; [6] typedef my_int -> [5]
        r.add(new int[]{0, info(CONST, false, 0), 3});
        r.add(new int[]{0, info(VOLATILE, false, 0), 4});
        r.add(new int[]{sMyInt, info(TYPEDEF, false, 0), 5});
        // [7] char[16]: ARRAY, btf_array {type 2, index_type 1, nelems 16}
        r.add(new int[]{0, info(ARRAY, false, 0), 0, 2, 1, 16});
        // [8] struct point (kind_flag: member offset = bitfield size << 24 | bit offset), size 8
        r.add(new int[]{st.s("point"), info(STRUCT, true, 3), 8,
                st.s("x"), 3, 0,
                st.s("flags"), 9, 3 << 24 | 32,
                st.s("b"), 9, 5 << 24 | 35});
        // [9] unsigned int
        r.add(new int[]{sUint, info(INT, false, 0), 4, 32});
        // [10] struct task, size 40: comm @0, pid (my_int) @128 bits, anonymous union @192, tail (point) @256
        r.add(new int[]{st.s("task"), info(STRUCT, false, 4), 40,
                st.s("comm"), 7, 0,
                st.s("pid"), 6, 128,
                0, 11, 192,
                st.s("tail"), 8, 256});
        // [11] anonymous union, size 8: a (int), inner (struct inner)
        r.add(new int[]{0, info(UNION, false, 2), 8, st.s("a"), 1, 0, st.s("inner"), 12, 0});
        // [12] struct inner, size 8: b @0, c @32
        r.add(new int[]{st.s("inner"), info(STRUCT, false, 2), 8, st.s("b"), 9, 0, st.s("c"), 9, 32});
        // [13] pointer -> struct task
        r.add(new int[]{0, info(PTR, false, 0), 10});
        // [14] int (int dfd, const char *name, ...): FUNC_PROTO, return type 1, params {name_off, type}
        r.add(new int[]{0, info(FUNC_PROTO, false, 3), 1, st.s("dfd"), 1, st.s("name"), 16, 0, 0});
        // [15] FUNC open -> [14], linkage global (vlen 1)
        r.add(new int[]{st.s("open"), info(FUNC, false, 1), 14});
        // [16] pointer -> [17] const -> [2] char
        r.add(new int[]{0, info(PTR, false, 0), 17});
        r.add(new int[]{0, info(CONST, false, 0), 2});
        // [18] enum E (signed, kind_flag), size 4: E_A = 0, E_B = -1
        r.add(new int[]{st.s("E"), info(ENUM, true, 2), 4, st.s("E_A"), 0, st.s("E_B"), -1});
        // [19] enum64 big, size 8: V = 0x1_0000_0002 (lo32, hi32)
        r.add(new int[]{st.s("big"), info(ENUM64, false, 1), 8, st.s("V"), 2, 1});
        // [20] forward declaration struct fwd
        r.add(new int[]{st.s("fwd"), info(FWD, false, 0), 0});
        // [21] VAR v -> int, linkage global
        r.add(new int[]{st.s("v"), info(VAR, false, 0), 1, 1});
        // [22] DATASEC .data..percpu size 16: {type 21, offset 8, size 4}
        r.add(new int[]{st.s(".data..percpu"), info(DATASEC, false, 1), 16, 21, 8, 4});
        // [23] FLOAT double, size 8
        r.add(new int[]{st.s("double"), info(FLOAT, false, 0), 8});
        // [24] DECL_TAG "tag" on [15], component_idx -1
        r.add(new int[]{st.s("tag"), info(DECL_TAG, false, 0), 15, -1});
        // [25] TYPE_TAG "user" -> char
        r.add(new int[]{st.s("user"), info(TYPE_TAG, false, 0), 2});
        // [26] restrict -> [16]
        r.add(new int[]{0, info(RESTRICT, false, 0), 16});
        // [27] struct oldbf (no kind_flag, size 4): lo @0, hi @4, both of the 4-bit INT [28]
        r.add(new int[]{st.s("oldbf"), info(STRUCT, false, 2), 4, st.s("lo"), 28, 0, st.s("hi"), 28, 4});
        // [28] INT unsigned int : 4 (size 4, 4 bits)
        r.add(new int[]{sUint, info(INT, false, 0), 4, 4});
        return r;
    }

    /** The whole blob: 24-byte header, type section, string section. */
    static byte[] blob() {
        Strings st = new Strings();
        List<int[]> recs = records(st);
        int typeLen = recs.stream().mapToInt(a -> a.length * 4).sum();
        byte[] strs = st.out.toByteArray();
        ByteBuffer b = ByteBuffer.allocate(24 + typeLen + strs.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putShort((short) 0xeB9F).put((byte) 1).put((byte) 0).putInt(24).putInt(0).putInt(typeLen).putInt(typeLen).putInt(strs.length);
        for (int[] rec : recs) for (int w : rec) b.putInt(w);
        b.put(strs);
        return b.array();
    }

    static Btf parse() throws Exception { return Btf.parse(blob(), "test"); }

    @Test
    void headerAndEveryKind() throws Exception {
        Btf btf = parse();
        assertEquals(28, btf.typeCount());
        assertEquals(0xeB9F, btf.header().magic());
        assertEquals(blob().length, btf.header().totalLength());
        Set<BtfKind> seen = EnumSet.noneOf(BtfKind.class);
        for (int id = 1; id <= btf.typeCount(); id++) {
            assertEquals(id, btf.type(id).id());
            seen.add(btf.type(id).kind());
        }
        assertEquals(EnumSet.range(BtfKind.INT, BtfKind.ENUM64), seen);
        assertNull(btf.type(0));
        assertThrows(NoSuchElementException.class, () -> btf.type(29));
        assertEquals(8, btf.pointerSize());   // no 'long' INT: the default
    }

    @Test
    void intsEnumsAndOthers() throws Exception {
        Btf btf = parse();
        BtfType i = btf.type(1);
        assertTrue(i.intSigned());
        assertEquals(32, i.intBits());
        assertEquals(BtfType.INT_CHAR | BtfType.INT_SIGNED, btf.type(2).intEncoding());
        BtfType e = btf.byName("E", BtfKind.ENUM).orElseThrow();
        assertTrue(e.enumSigned());
        assertEquals(List.of(new BtfType.Enumerator("E_A", 0), new BtfType.Enumerator("E_B", -1)), e.enumerators());
        assertEquals(0x1_0000_0002L, btf.byName("big", BtfKind.ENUM64).orElseThrow().enumerators().getFirst().value());
        assertEquals(BtfKind.FWD, btf.byName("fwd").getFirst().kind());
        assertTrue(btf.structByName("fwd").isEmpty(), "a FWD is not a struct definition");
        assertEquals(-1, btf.type(24).componentIdx());
        assertEquals(15, btf.type(24).type());
        assertEquals(BtfType.LINKAGE_GLOBAL, btf.type(21).linkage());
        assertEquals(BtfType.LINKAGE_GLOBAL, btf.type(15).linkage());
        assertEquals(8, btf.sizeOf(23));
        Btf.VarLocation v = btf.variable("v").orElseThrow();
        assertEquals(".data..percpu", v.section());
        assertEquals(8, v.offset());
        assertEquals(4, v.size());
        assertEquals(1, v.typeId());
        assertTrue(btf.variable("nope").isEmpty());
        // two INTs share the name "unsigned int"
        assertEquals(2, btf.byName("unsigned int").size());
    }

    @Test
    void typedefChainsAndSizes() throws Exception {
        Btf btf = parse();
        assertEquals(9, btf.resolve(6).id(), "my_int -> volatile -> const -> u32 -> unsigned int");
        assertEquals(9, btf.resolve(3).id());
        assertNull(btf.resolve(0));
        assertEquals(4, btf.sizeOf(6));
        assertEquals(16, btf.sizeOf(7));
        assertEquals(8, btf.sizeOf(13));
        assertEquals(40, btf.sizeOf(10));
        assertEquals(1, btf.sizeOf(25));
        assertThrows(IllegalArgumentException.class, () -> btf.sizeOf(0));
        assertThrows(IllegalArgumentException.class, () -> btf.sizeOf(15));   // a function
        assertThrows(IllegalArgumentException.class, () -> btf.sizeOf(20));   // a forward declaration
        assertEquals("my_int", btf.typeName(6));
        assertEquals("volatile const u32", btf.typeName(5));
        assertEquals("char[16]", btf.typeName(7));
        assertEquals("struct task *", btf.typeName(13));
        assertEquals("const char *", btf.typeName(16));
        assertEquals("const char * restrict", btf.typeName(26));
        assertEquals("union (anon)", btf.typeName(11));
        assertEquals("int (int, const char *, ...)", btf.typeName(14));
    }

    @Test
    void structMembers() throws Exception {
        Btf btf = parse();
        BtfType task = btf.structByName("task").orElseThrow();
        Btf.Field comm = btf.member(task, "comm").orElseThrow();
        assertEquals(0, comm.offset());
        assertEquals(16, comm.size());
        assertEquals(7, comm.typeId());
        Btf.Field pid = btf.member("task", "pid").orElseThrow();
        assertEquals(16, pid.offset());
        assertEquals(128, pid.bitOffset());
        assertEquals(4, pid.size());
        assertEquals("my_int", btf.typeName(pid.typeId()));
        // members of the anonymous union are found by their own names
        assertEquals(24, btf.member(task, "a").orElseThrow().offset());
        assertEquals(24, btf.offsetOf("task", "inner").offset());
        assertEquals(28, btf.offsetOf("task", "inner.c").offset());
        assertEquals(32, btf.offsetOf("task", "tail.x").offset());
        assertEquals(3, btf.offsetOf("task", "comm[3]").offset());
        assertEquals(1, btf.offsetOf("task", "comm[3]").size());
        assertTrue(btf.member(task, "nope").isEmpty());
        // a union's members all start at 0
        assertEquals(0, btf.member(btf.type(11), "inner").orElseThrow().offset());
    }

    @Test
    void bitfields() throws Exception {
        Btf btf = parse();
        // kind_flag encoding
        Btf.Field flags = btf.offsetOf("point", "flags");
        assertTrue(flags.bitfield());
        assertEquals(32, flags.bitOffset());
        assertEquals(3, flags.bitfieldSize());
        assertEquals(4, flags.offset());
        Btf.Field b = btf.offsetOf("task", "tail.b");
        assertEquals(256 + 35, b.bitOffset());
        assertEquals(5, b.bitfieldSize());
        assertFalse(btf.offsetOf("point", "x").bitfield());
        BtfType.Member m = btf.structByName("point").orElseThrow().directMember("b");
        assertTrue(m.isBitfield());
        assertEquals(4, m.byteOffset());
        // old encoding: bitfield width in the member's INT type
        Btf.Field hi = btf.offsetOf("oldbf", "hi");
        assertEquals(4, hi.bitOffset());
        assertEquals(4, hi.bitfieldSize());
        assertEquals(4, btf.offsetOf("oldbf", "lo").bitfieldSize());
        assertFalse(btf.offsetOf("task", "pid").bitfield(), "a 32-bit INT member is no bitfield");
    }

    @Test
    void functionPrototypes() throws Exception {
        Btf btf = parse();
        Btf.FuncSignature f = btf.funcProto("open").orElseThrow();
        assertEquals(List.of("dfd", "name"), f.paramNames());
        assertTrue(f.variadic());
        assertEquals("int", btf.typeName(f.returnTypeId()));
        assertEquals("const char *", btf.typeName(f.params().get(1).typeId()));
        assertEquals(14, f.protoId());
        assertTrue(btf.funcProto("close").isEmpty());
        assertTrue(btf.funcProto("task").isEmpty(), "not a FUNC");
    }

    @Test
    void badPathsSayWhatIsMissing() throws Exception {
        Btf btf = parse();
        NoSuchElementException e = assertThrows(NoSuchElementException.class, () -> btf.offsetOf("task", "inner.zz"));
        assertTrue(e.getMessage().contains("struct inner") && e.getMessage().contains("'zz'"), e.getMessage());
        e = assertThrows(NoSuchElementException.class, () -> btf.offsetOf("task", "pid.x"));
        assertTrue(e.getMessage().contains("not a struct or union"), e.getMessage());
        e = assertThrows(NoSuchElementException.class, () -> btf.offsetOf("nosuch", "x"));
        assertTrue(e.getMessage().contains("nosuch"), e.getMessage());
        e = assertThrows(NoSuchElementException.class, () -> btf.offsetOf("task", "pid[1]"));
        assertTrue(e.getMessage().contains("not an array"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> btf.offsetOf("task", "comm[x]"));
        assertThrows(IllegalArgumentException.class, () -> btf.offsetOf("task", "a..b"));
    }

    // ------------------------------------------------------------ corrupt input

    private static String fails(byte[] d) {
        return assertThrows(BtfFormatException.class, () -> Btf.parse(d, "bad")).getMessage();
    }

    private static byte[] withInt(byte[] d, int off, int v) {
        byte[] c = d.clone();
        ByteBuffer.wrap(c).order(ByteOrder.LITTLE_ENDIAN).putInt(off, v);
        return c;
    }

    @Test
    void badMagicAndVersion() {
        byte[] d = blob();
        byte[] c = d.clone();
        c[0] = 0x12;
        assertTrue(fails(c).contains("magic 0xeb12"), fails(c));
        c = d.clone();
        c[0] = (byte) 0xeb; c[1] = (byte) 0x9f;
        assertTrue(fails(c).contains("big-endian"), fails(c));
        c = d.clone();
        c[2] = 2;
        assertTrue(fails(c).contains("version 2"), fails(c));
        assertTrue(fails(new byte[0]).contains("truncated"));
    }

    @Test
    void truncated() {
        byte[] d = blob();
        assertTrue(fails(Arrays.copyOf(d, 10)).contains("truncated BTF: 10 bytes"));
        String m = fails(Arrays.copyOf(d, d.length - 1));
        assertTrue(m.contains("truncated") && m.contains("describes " + d.length), m);
        // type_len 4 short: the last record no longer fits in the type section
        int typeLen = ByteBuffer.wrap(d).order(ByteOrder.LITTLE_ENDIAN).getInt(12);
        m = fails(withInt(d, 12, typeLen - 4));
        assertTrue(m.contains("type id 28") && m.contains("needs 16 bytes, 12 left"), m);
        // type_len 8 long: overlaps the strings
        m = fails(withInt(d, 12, typeLen + 8));
        assertTrue(m.contains("overlap"), m);
    }

    @Test
    void corruptRecords() {
        byte[] d = blob();
        // [1]'s info with kind 25
        String m = fails(withInt(d, 24 + 4, 25 << 24));
        assertTrue(m.contains("type id 1") && m.contains("unknown kind 25"), m);
        // [1]'s name_off past the string section
        m = fails(withInt(d, 24, 1 << 20));
        assertTrue(m.contains("string offset 1048576"), m);
        // [3] typedef -> 999
        m = fails(withInt(d, 24 + 16 + 16 + 8, 999));
        assertTrue(m.contains("[3] TYPEDEF 'u32' refers to type id 999, but the last id is 28"), m);
        // type section not 4-aligned
        m = fails(withInt(d, 8, 2));
        assertTrue(m.contains("not 4-aligned"), m);
        // vlen of [8] raised to 1000: the members run past the type section
        m = fails(withInt(d, 24 + 104 + 4, 0x80000000 | 4 << 24 | 1000));   // [1..6] take 80 bytes, [7] 24
        assertTrue(m.contains("type id 8 (STRUCT, vlen 1000)"), m);
    }

    @Test
    void scanFindsAnEmbeddedBlob() throws Exception {
        byte[] b = blob();
        byte[] image = new byte[b.length + 1001];
        new java.util.Random(1).nextBytes(image);
        // a decoy header that does not parse
        image[7] = (byte) 0x9f; image[8] = (byte) 0xeb; image[9] = 1; image[11] = 24; image[12] = 0; image[13] = 0; image[14] = 0;
        System.arraycopy(b, 0, image, 333, b.length);
        BtfLocator.Found f = BtfLocator.scan(image, "image");
        assertEquals(333, f.fileOffset());
        assertEquals(b.length, f.size());
        assertEquals(28, f.btf().typeCount());
        assertEquals(BtfLocator.Method.MAGIC_SCAN, f.method());
        // with __start_BTF/__stop_BTF symbols the scan is not needed
        long base = 0xffff800008000000L;
        dev.kpemu.image.SymbolTable syms = dev.kpemu.image.SymbolTable.of(List.of(
                new dev.kpemu.image.Symbol("__start_BTF", base + 333, 'R', 0),
                new dev.kpemu.image.Symbol("__stop_BTF", base + 333 + b.length, 'R', 0)),
                base, a -> a - base >= 0 && a - base < image.length ? java.util.OptionalLong.of(a - base) : java.util.OptionalLong.empty(), "syms");
        BtfLocator.Found viaSyms = BtfLocator.fromArm64Image(image, "image", syms);
        assertEquals(BtfLocator.Method.SYMBOLS, viaSyms.method());
        assertEquals(333, viaSyms.fileOffset());
        assertEquals(base + 333, viaSyms.vaddr().orElseThrow());
        byte[] junk = new byte[4096];
        String m = assertThrows(BtfFormatException.class, () -> BtfLocator.scan(junk, "junk")).getMessage();
        assertTrue(m.contains("no BTF found"), m);
    }
}
