package dev.kpemu.image.btf;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Optional;

/**
 * A parsed BTF blob (BPF Type Format, as the kernel's {@code .BTF} section carries it with
 * CONFIG_DEBUG_INFO_BTF): header, type section and string section, with lookups by name,
 * member offsets (through anonymous members and dotted paths), type sizes and function
 * prototypes.
 *
 * <p>Layout (Linux Documentation/bpf/btf.rst): a header {@code u16 magic 0xeB9F, u8 version 1,
 * u8 flags, u32 hdr_len, u32 type_off, u32 type_len, u32 str_off, u32 str_len}, the two section
 * offsets counted from the end of the header. The type section is a sequence of records, each a
 * 12-byte {@code btf_type} followed by kind-specific data; the first record is type id 1 (id 0 is
 * void). Only little-endian blobs are read (x86-64 and arm64 kernels).
 */
public final class Btf {
    public static final int MAGIC = 0xeB9F;
    public static final int HEADER_LEN = 24;
    private static final int MAX_DEPTH = 64;

    /** The header fields; offsets are relative to the end of the header. */
    public record Header(int magic, int version, int flags, int hdrLen, long typeOff, long typeLen, long strOff, long strLen) {
        /** Bytes from the start of the header to the end of the later of the two sections. */
        public long totalLength() { return hdrLen + Math.max(typeOff + typeLen, strOff + strLen); }
    }

    /**
     * Where a member lies inside an outer type.
     *
     * @param path         the member path as given ({@code thread_info.flags})
     * @param typeId       the member's declared type (not resolved)
     * @param bitOffset    offset from the start of the outer type, in bits
     * @param bitfieldSize bitfield width in bits, 0 for an ordinary member
     * @param size         byte size of the member's type (for a bitfield: of its storage type)
     */
    public record Field(String path, int typeId, long bitOffset, int bitfieldSize, long size) {
        /** Byte offset (rounded down for a bitfield). */
        public long offset() { return bitOffset >>> 3; }
        public boolean bitfield() { return bitfieldSize != 0; }
    }

    /** A function's prototype: FUNC → FUNC_PROTO, with parameter names and types. */
    public record FuncSignature(String name, int funcId, int protoId, int returnTypeId, List<BtfType.Param> params,
                                boolean variadic, int linkage) {
        public List<String> paramNames() { return params.stream().map(BtfType.Param::name).toList(); }
    }

    /** A variable placed in a DATASEC (e.g. a per-CPU variable in {@code .data..percpu}). */
    public record VarLocation(String name, String section, int varId, int typeId, long offset, long size) {}

    private final String source;
    private final Header header;
    /** The blob's own bytes (copied out of the kernel file, so that array can go). */
    private final byte[] data;
    private final int strStart, strLen;
    /** Where each type's record starts in {@link #data}: index = id, element 0 unused. */
    private final int[] recordAt;
    /** Types decoded so far (index = id): a kernel's BTF has ~100,000, of which a session looks at a few hundred. */
    private final BtfType[] decoded;
    /** Named types by name: chain heads per hash bucket and, per id, the next id with a name in the same bucket. */
    private final int[] nameBuckets, nextInBucket;
    private final int pointerSize;

    private Btf(String source, Header header, byte[] data, int strStart, int strLen, int[] recordAt) {
        this.source = source;
        this.header = header;
        this.data = data;
        this.strStart = strStart;
        this.strLen = strLen;
        this.recordAt = recordAt;
        this.decoded = new BtfType[recordAt.length];
        int buckets = Integer.highestOneBit(Math.max(16, recordAt.length)) << 1;
        this.nameBuckets = new int[buckets];
        this.nextInBucket = new int[recordAt.length];
        for (int id = recordAt.length - 1; id >= 1; id--) {   // from the end, so each chain runs in id order
            int off = nameOffset(id);
            if (off == 0 || data[strStart + off] == 0) continue;
            int b = hashAt(strStart + off) & (buckets - 1);
            nextInBucket[id] = nameBuckets[b];
            nameBuckets[b] = id;
        }
        int ps = 8;
        for (String n : new String[]{"long unsigned int", "long int", "unsigned long"}) {
            Optional<BtfType> t = byName(n, BtfKind.INT);
            if (t.isPresent()) { ps = (int) t.get().size(); break; }
        }
        this.pointerSize = ps;
    }

    // ---------------------------------------------------------------- parsing

    /** Parses a blob that starts at offset 0 of {@code data} (trailing bytes are ignored). */
    public static Btf parse(byte[] data, String source) throws BtfFormatException {
        return parse(data, 0, data.length, source);
    }

    /** Reads and checks the header at {@code offset}; {@code limit} is the number of bytes available from there. */
    public static Header header(byte[] data, int offset, int limit, String source) throws BtfFormatException {
        if (offset < 0 || limit < 0 || (long) offset + limit > data.length) throw new IllegalArgumentException("range outside the array");
        if (limit < HEADER_LEN) throw new BtfFormatException(source + ": truncated BTF: " + limit + " bytes, the header alone needs " + HEADER_LEN);
        ByteBuffer b = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
        int magic = b.getShort(offset) & 0xffff;
        if (magic == Integer.reverseBytes(MAGIC) >>> 16) throw new BtfFormatException(source + ": big-endian BTF is not supported");
        if (magic != MAGIC) throw new BtfFormatException(String.format("%s: not BTF: magic 0x%04x, expected 0x%04x", source, magic, MAGIC));
        int version = data[offset + 2] & 0xff, flags = data[offset + 3] & 0xff;
        if (version != 1) throw new BtfFormatException(source + ": unsupported BTF version " + version + " (only version 1 is known)");
        long hdrLen = b.getInt(offset + 4) & 0xffffffffL;
        long typeOff = b.getInt(offset + 8) & 0xffffffffL, typeLen = b.getInt(offset + 12) & 0xffffffffL;
        long strOff = b.getInt(offset + 16) & 0xffffffffL, strLen = b.getInt(offset + 20) & 0xffffffffL;
        if (hdrLen < HEADER_LEN) throw new BtfFormatException(source + ": corrupt BTF: hdr_len " + hdrLen + " < " + HEADER_LEN);
        if (hdrLen > limit) throw new BtfFormatException(source + ": truncated BTF: hdr_len " + hdrLen + " but only " + limit + " bytes");
        for (long p = HEADER_LEN; p < hdrLen; p++) {
            if (data[(int) (offset + p)] != 0) throw new BtfFormatException(source + ": unsupported BTF header: non-zero byte at " + p + " of a " + hdrLen + "-byte header");
        }
        Header h = new Header(magic, version, flags, (int) hdrLen, typeOff, typeLen, strOff, strLen);
        if ((typeOff & 3) != 0) throw new BtfFormatException(source + ": corrupt BTF: type_off " + typeOff + " is not 4-aligned");
        if ((typeLen & 3) != 0) throw new BtfFormatException(source + ": corrupt BTF: type_len " + typeLen + " is not a multiple of 4");
        if (strLen == 0) throw new BtfFormatException(source + ": corrupt BTF: empty string section");
        if (typeOff < strOff ? typeOff + typeLen > strOff : strOff + strLen > typeOff) {
            throw new BtfFormatException(source + ": corrupt BTF: type section [" + typeOff + ", +" + typeLen + ") and string section [" + strOff + ", +" + strLen + ") overlap");
        }
        if (h.totalLength() > limit) {
            throw new BtfFormatException(source + ": truncated BTF: the header describes " + h.totalLength() + " bytes but only " + limit + " are there");
        }
        return h;
    }

    /**
     * Parses the blob at {@code offset}, of at most {@code limit} bytes: checks every record (sizes,
     * kinds, string offsets, type references) and indexes the names; the records themselves are
     * decoded into {@link BtfType}s when first asked for.
     */
    public static Btf parse(byte[] data, int offset, int limit, String source) throws BtfFormatException {
        Header h = header(data, offset, limit, source);
        byte[] blob = java.util.Arrays.copyOfRange(data, offset, offset + (int) h.totalLength());
        int strStart = (int) (h.hdrLen() + h.strOff());
        int strLen = (int) h.strLen();
        if (blob[strStart] != 0) throw new BtfFormatException(source + ": corrupt BTF: the string section does not start with an empty string");
        if (blob[strStart + strLen - 1] != 0) throw new BtfFormatException(source + ": corrupt BTF: the string section does not end with NUL");
        int start = (int) (h.hdrLen() + h.typeOff());
        int end = start + (int) h.typeLen();
        int[] at = new int[1 << 16];
        int count = 0;   // the highest id so far
        int p = start;
        while (p < end) {
            int id = count + 1;
            if (end - p < 12) throw new BtfFormatException(source + ": truncated BTF: type id " + id + " at type-section offset " + (p - start) + " needs 12 bytes, " + (end - p) + " left");
            checkString(getInt(blob, p), id, strLen, source);
            int info = getInt(blob, p + 4);
            int vlen = info & 0xffff;
            int kindCode = (info >>> 24) & 0x1f;
            BtfKind kind = BtfKind.ofCode(kindCode);
            if (kind == null) throw new BtfFormatException(source + ": corrupt BTF: type id " + id + " at type-section offset " + (p - start) + " has unknown kind " + kindCode);
            int extraLen = extraLength(kind, vlen);
            if (end - p - 12 < extraLen) {
                throw new BtfFormatException(source + ": truncated BTF: type id " + id + " (" + kind + ", vlen " + vlen + ") at type-section offset "
                        + (p - start) + " needs " + (12 + extraLen) + " bytes, " + (end - p) + " left");
            }
            int q = p + 12;
            switch (kind) {
                case STRUCT, UNION, ENUM64 -> { for (int i = 0; i < vlen; i++, q += 12) checkString(getInt(blob, q), id, strLen, source); }
                case ENUM, FUNC_PROTO -> { for (int i = 0; i < vlen; i++, q += 8) checkString(getInt(blob, q), id, strLen, source); }
                default -> { }
            }
            if (id >= at.length) at = java.util.Arrays.copyOf(at, at.length * 2);
            at[id] = p;
            count = id;
            p += 12 + extraLen;
        }
        if (p != end) throw new BtfFormatException(source + ": corrupt BTF: the last type record ends " + (p - end) + " bytes past the type section");
        Btf btf = new Btf(source, h, blob, strStart, strLen, java.util.Arrays.copyOf(at, count + 1));
        btf.checkReferences();
        return btf;
    }

    private static int extraLength(BtfKind kind, int vlen) {
        return switch (kind) {
            case INT, VAR, DECL_TAG -> 4;
            case ARRAY -> 12;
            case STRUCT, UNION, ENUM64, DATASEC -> 12 * vlen;
            case ENUM, FUNC_PROTO -> 8 * vlen;
            default -> 0;
        };
    }

    private static void checkString(int off, int id, int len, String source) throws BtfFormatException {
        if (off != 0 && (off < 0 || off >= len)) {
            throw new BtfFormatException(source + ": corrupt BTF: type id " + id + " names string offset " + (off & 0xffffffffL) + ", outside the " + len + "-byte string section");
        }
    }

    private static int getInt(byte[] d, int p) {
        return (d[p] & 0xff) | (d[p + 1] & 0xff) << 8 | (d[p + 2] & 0xff) << 16 | (d[p + 3] & 0xff) << 24;
    }

    /** Every reference inside the type section names an existing id; a FUNC's names a FUNC_PROTO. */
    private void checkReferences() throws BtfFormatException {
        int n = recordAt.length;
        for (int id = 1; id < n; id++) {
            int p = recordAt[id];
            BtfKind kind = rawKind(id);
            int vlen = getInt(data, p + 4) & 0xffff;
            int third = getInt(data, p + 8);
            switch (kind) {
                case PTR, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FUNC_PROTO, VAR, DECL_TAG, TYPE_TAG -> ref(id, third, n);
                case ARRAY -> { ref(id, getInt(data, p + 12), n); ref(id, getInt(data, p + 16), n); }
                default -> { }
            }
            switch (kind) {
                case STRUCT, UNION -> { for (int i = 0; i < vlen; i++) ref(id, getInt(data, p + 12 + 12 * i + 4), n); }
                case FUNC_PROTO -> { for (int i = 0; i < vlen; i++) ref(id, getInt(data, p + 12 + 8 * i + 4), n); }
                case DATASEC -> { for (int i = 0; i < vlen; i++) ref(id, getInt(data, p + 12 + 12 * i), n); }
                default -> { }
            }
            if (kind == BtfKind.FUNC && third != 0 && rawKind(third) != BtfKind.FUNC_PROTO) {
                throw new BtfFormatException(source + ": corrupt BTF: FUNC " + type(id) + " refers to " + type(third) + ", not a FUNC_PROTO");
            }
        }
    }

    private void ref(int id, int target, int n) throws BtfFormatException {
        if (target < 0 || target >= n) throw new BtfFormatException(source + ": corrupt BTF: " + type(id) + " refers to type id " + (target & 0xffffffffL) + ", but the last id is " + (n - 1));
    }

    private BtfKind rawKind(int id) { return BtfKind.ofCode((getInt(data, recordAt[id] + 4) >>> 24) & 0x1f); }

    private int nameOffset(int id) { return getInt(data, recordAt[id]); }

    /** The string at this offset of the string section (checked when parsed). */
    private String string(int off) {
        if (off == 0) return "";
        int s = strStart + off, e = s;
        while (data[e] != 0) e++;   // the section ends with NUL (checked)
        return new String(data, s, e - s, StandardCharsets.UTF_8);
    }

    /** FNV-1a over the NUL-terminated bytes at {@code p}. */
    private int hashAt(int p) {
        int h = 0x811c9dc5;
        for (; data[p] != 0; p++) h = (h ^ (data[p] & 0xff)) * 0x01000193;
        return h;
    }

    private static int hash(byte[] name) {
        int h = 0x811c9dc5;
        for (byte c : name) h = (h ^ (c & 0xff)) * 0x01000193;
        return h;
    }

    private boolean nameEquals(int id, byte[] name) {
        int p = strStart + nameOffset(id);
        for (byte c : name) if (data[p++] != c) return false;
        return data[p] == 0;
    }

    /** Decodes one record; members of a struct without kind_flag get their bitfields from INT member types. */
    private BtfType decode(int id) {
        int p = recordAt[id];
        String name = string(getInt(data, p));
        int info = getInt(data, p + 4);
        int sizeOrType = getInt(data, p + 8);
        int vlen = info & 0xffff;
        boolean kflag = (info & 0x80000000) != 0;
        BtfKind kind = BtfKind.ofCode((info >>> 24) & 0x1f);
        int q = p + 12;
        List<BtfType.Member> members = List.of();
        List<BtfType.Param> params = List.of();
        List<BtfType.Enumerator> enums = List.of();
        List<BtfType.DatasecVar> secVars = List.of();
        BtfType.ArrayInfo array = null;
        int extra = 0;
        switch (kind) {
            case INT, VAR, DECL_TAG -> extra = getInt(data, q);
            case ARRAY -> array = new BtfType.ArrayInfo(getInt(data, q), getInt(data, q + 4), getInt(data, q + 8) & 0xffffffffL);
            case STRUCT, UNION -> {
                List<BtfType.Member> ms = new ArrayList<>(vlen);
                for (int i = 0; i < vlen; i++, q += 12) {
                    String mn = string(getInt(data, q));
                    int mt = getInt(data, q + 4);
                    long off = getInt(data, q + 8) & 0xffffffffL;
                    BtfType.Member m = kflag ? new BtfType.Member(mn, mt, off & 0xffffff, (int) (off >>> 24)) : new BtfType.Member(mn, mt, off, 0);
                    if (!kflag) {
                        BtfType it = resolveQuietly(mt);
                        if (it != null && it.kind() == BtfKind.INT && (it.intOffset() != 0 || it.intBits() != it.size() * 8)) {
                            m = new BtfType.Member(mn, mt, off + it.intOffset(), it.intBits());
                        }
                    }
                    ms.add(m);
                }
                members = Collections.unmodifiableList(ms);
            }
            case ENUM -> {
                List<BtfType.Enumerator> es = new ArrayList<>(vlen);
                for (int i = 0; i < vlen; i++, q += 8) {
                    int v = getInt(data, q + 4);
                    es.add(new BtfType.Enumerator(string(getInt(data, q)), kflag ? v : v & 0xffffffffL));
                }
                enums = List.copyOf(es);
            }
            case ENUM64 -> {
                List<BtfType.Enumerator> es = new ArrayList<>(vlen);
                for (int i = 0; i < vlen; i++, q += 12) {
                    long v = (getInt(data, q + 4) & 0xffffffffL) | (long) getInt(data, q + 8) << 32;
                    es.add(new BtfType.Enumerator(string(getInt(data, q)), v));
                }
                enums = List.copyOf(es);
            }
            case FUNC_PROTO -> {
                List<BtfType.Param> ps = new ArrayList<>(vlen);
                for (int i = 0; i < vlen; i++, q += 8) ps.add(new BtfType.Param(string(getInt(data, q)), getInt(data, q + 4)));
                params = List.copyOf(ps);
            }
            case DATASEC -> {
                List<BtfType.DatasecVar> vs = new ArrayList<>(vlen);
                for (int i = 0; i < vlen; i++, q += 12) {
                    vs.add(new BtfType.DatasecVar(getInt(data, q), getInt(data, q + 4) & 0xffffffffL, getInt(data, q + 8) & 0xffffffffL));
                }
                secVars = List.copyOf(vs);
            }
            default -> { }
        }
        return new BtfType(id, kind, name, kflag, vlen, sizeOrType, members, params, enums, array, secVars, extra);
    }

    /** The type after modifiers, or null (void, an id out of range, a chain too long): for decoding members. */
    private BtfType resolveQuietly(int id) {
        for (int d = 0; d < MAX_DEPTH && id > 0 && id < recordAt.length; d++) {
            BtfType t = type(id);
            if (!t.kind().isModifier()) return t;
            id = t.sizeOrType();
        }
        return null;
    }

    // ---------------------------------------------------------------- basic access

    /** Where the blob came from. */
    public String source() { return source; }
    public Header header() { return header; }
    /** Number of types (the highest type id). */
    public int typeCount() { return recordAt.length - 1; }

    /** The type with this id (1..typeCount()); id 0 (void) gives null. */
    public BtfType type(int id) {
        if (id < 0 || id >= recordAt.length) throw new NoSuchElementException("no BTF type id " + id + " in " + source + " (1.." + typeCount() + ")");
        if (id == 0) return null;
        BtfType t = decoded[id];
        if (t == null) decoded[id] = t = decode(id);   // a race decodes twice, to equal immutable values
        return t;
    }

    /** All types in id order (element 0 is null for void); each is decoded when read. */
    public List<BtfType> types() {
        return new java.util.AbstractList<>() {
            @Override public BtfType get(int id) { return type(id); }
            @Override public int size() { return recordAt.length; }
        };
    }

    /** The ids of the types of this kind, in id order, without decoding the others. */
    public java.util.stream.IntStream idsOfKind(BtfKind kind) {
        return java.util.stream.IntStream.range(1, recordAt.length).filter(id -> rawKind(id) == kind);
    }

    /** A type's name ("" when anonymous) without decoding the rest of it. */
    public String nameOf(int id) {
        if (id <= 0 || id >= recordAt.length) throw new NoSuchElementException("no BTF type id " + id + " in " + source + " (1.." + typeCount() + ")");
        return string(nameOffset(id));
    }

    /** The pointer size, from the INT type {@code long unsigned int} (8 when absent). */
    public int pointerSize() { return pointerSize; }

    /** All named types with this name, any kind, in id order. */
    public List<BtfType> byName(String name) {
        if (name.isEmpty()) return List.of();
        byte[] n = name.getBytes(StandardCharsets.UTF_8);
        List<BtfType> found = null;
        for (int id = nameBuckets[hash(n) & (nameBuckets.length - 1)]; id != 0; id = nextInBucket[id]) {
            if (!nameEquals(id, n)) continue;
            if (found == null) found = new ArrayList<>(1);
            found.add(type(id));
        }
        return found == null ? List.of() : found;
    }

    /** The first type of this kind with this name. */
    public Optional<BtfType> byName(String name, BtfKind kind) {
        for (BtfType t : byName(name)) if (t.kind() == kind) return Optional.of(t);
        return Optional.empty();
    }

    /** The (complete, not FWD) struct with this name. */
    public Optional<BtfType> structByName(String name) { return byName(name, BtfKind.STRUCT); }

    public Optional<BtfType> unionByName(String name) { return byName(name, BtfKind.UNION); }

    /** The struct with this name, else a union; throws naming the source when there is neither. */
    public BtfType composite(String name) {
        return structByName(name).or(() -> unionByName(name))
                .orElseThrow(() -> new NoSuchElementException("no struct or union '" + name + "' in the BTF of " + source));
    }

    // ---------------------------------------------------------------- resolution and sizes

    /** The type after skipping typedef/const/volatile/restrict/type-tag; null for void. */
    public BtfType resolve(int id) {
        int start = id;
        for (int d = 0; d < MAX_DEPTH; d++) {
            if (id == 0) return null;
            BtfType t = type(id);
            if (!t.kind().isModifier()) return t;
            id = t.sizeOrType();
        }
        throw new IllegalStateException("BTF type id " + start + " in " + source + ": modifier chain longer than " + MAX_DEPTH + " (a loop?)");
    }

    public BtfType resolve(BtfType t) { return t == null ? null : resolve(t.id()); }

    /** Byte size of a type (void, functions and forward declarations have none). */
    public long sizeOf(int id) {
        return sizeOf(id, 0);
    }

    public long sizeOf(BtfType t) { return sizeOf(t.id(), 0); }

    private long sizeOf(int id, int depth) {
        if (depth > MAX_DEPTH) throw new IllegalStateException("BTF type id " + id + " in " + source + ": type chain longer than " + MAX_DEPTH);
        if (id == 0) throw new IllegalArgumentException("void has no size");
        BtfType t = type(id);
        return switch (t.kind()) {
            case INT, STRUCT, UNION, ENUM, ENUM64, FLOAT, DATASEC -> t.size();
            case PTR -> pointerSize;
            case TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG, VAR -> sizeOf(t.sizeOrType(), depth + 1);
            case ARRAY -> t.array().nelems() * sizeOf(t.array().elemType(), depth + 1);
            default -> throw new IllegalArgumentException(t + " in " + source + " has no size");
        };
    }

    // ---------------------------------------------------------------- members

    /**
     * A member of a struct/union by name, also found inside anonymous struct/union members (as C
     * allows {@code s.x} for a member of an unnamed union in {@code s}); the offset is from the
     * start of {@code composite}. Typedefs/modifiers around {@code composite} are looked through.
     */
    public Optional<Field> member(BtfType composite, String name) {
        BtfType c = resolve(composite);
        if (c == null || !c.kind().isComposite()) throw new IllegalArgumentException(composite + " is not a struct or union");
        return Optional.ofNullable(findMember(c, name, 0, 0));
    }

    /** {@link #member(BtfType, String)} of the struct (else union) with this name. */
    public Optional<Field> member(String compositeName, String name) { return member(composite(compositeName), name); }

    private Field findMember(BtfType c, String name, long base, int depth) {
        if (depth > MAX_DEPTH) return null;
        for (BtfType.Member m : c.members()) {
            if (m.name().equals(name)) return field(name, m, base);
        }
        for (BtfType.Member m : c.members()) {
            if (!m.anonymous()) continue;
            BtfType inner = resolve(m.typeId());
            if (inner != null && inner.kind().isComposite()) {
                Field f = findMember(inner, name, base + m.bitOffset(), depth + 1);
                if (f != null) return f;
            }
        }
        return null;
    }

    private Field field(String path, BtfType.Member m, long base) {
        return new Field(path, m.typeId(), base + m.bitOffset(), m.bitfieldSize(), sizeOf(m.typeId()));
    }

    /**
     * The offset of a member path inside a struct/union: {@code pid}, {@code thread_info.flags},
     * {@code thread.sp}, with array elements as {@code name[3]} ({@code regs[0]}). Members
     * inside anonymous structs/unions are found by their own names. Pointers are not followed
     * (the offset would not be static). Throws NoSuchElementException naming the missing step.
     */
    public Field offsetOf(String compositeName, String path) { return offsetOf(composite(compositeName), path); }

    public Field offsetOf(BtfType composite, String path) {
        if (path.isEmpty()) throw new IllegalArgumentException("empty member path");
        BtfType cur = composite;
        long bitOffset = 0;
        Field last = null;
        String[] parts = path.split("\\.", -1);
        for (int i = 0; i < parts.length; i++) {
            String part = parts[i];
            List<Long> indices = new ArrayList<>();
            int br = part.indexOf('[');
            String name = br < 0 ? part : part.substring(0, br);
            if (br >= 0) {
                String rest = part.substring(br);
                while (!rest.isEmpty()) {
                    int close = rest.indexOf(']');
                    if (!rest.startsWith("[") || close < 0) throw new IllegalArgumentException("bad member path '" + path + "' at '" + part + "'");
                    try {
                        indices.add(Long.decode(rest.substring(1, close).trim()));
                    } catch (NumberFormatException e) {
                        throw new IllegalArgumentException("bad array index in member path '" + path + "' at '" + part + "'");
                    }
                    rest = rest.substring(close + 1);
                }
            }
            if (name.isEmpty()) throw new IllegalArgumentException("bad member path '" + path + "': empty member name");
            String where = i == 0 ? describe(composite) : describe(cur) + " (at '" + String.join(".", java.util.Arrays.copyOf(parts, i)) + "')";
            BtfType c = resolve(cur);
            if (c == null || !c.kind().isComposite()) {
                throw new NoSuchElementException(where + " is not a struct or union, so it has no member '" + name + "' (path '" + path + "' in " + source + ")");
            }
            Field f = findMember(c, name, 0, 0);
            if (f == null) throw new NoSuchElementException(where + " has no member '" + name + "' (path '" + path + "' in " + source + ")");
            bitOffset += f.bitOffset();
            int typeId = f.typeId();
            for (long idx : indices) {
                BtfType arr = resolve(typeId);
                if (arr == null || arr.kind() != BtfKind.ARRAY) throw new NoSuchElementException("'" + name + "' in path '" + path + "' is " + typeName(typeId) + ", not an array");
                if (idx < 0) throw new IllegalArgumentException("negative array index in member path '" + path + "'");
                int elem = arr.array().elemType();
                bitOffset += idx * sizeOf(elem) * 8;
                typeId = elem;
            }
            last = indices.isEmpty() ? new Field(path, typeId, bitOffset, f.bitfieldSize(), f.size())
                                     : new Field(path, typeId, bitOffset, 0, sizeOf(typeId));
            if (i + 1 < parts.length && last.bitfield()) throw new NoSuchElementException("'" + name + "' in path '" + path + "' is a bitfield");
            cur = type(typeId);
            if (cur == null && i + 1 < parts.length) throw new NoSuchElementException("'" + name + "' in path '" + path + "' is void");
        }
        return last;
    }

    private String describe(BtfType t) { return t == null ? "void" : typeName(t.id()); }

    // ---------------------------------------------------------------- functions and variables

    /** The prototype of a kernel function (FUNC → FUNC_PROTO): return type, parameter names and types. */
    public Optional<FuncSignature> funcProto(String functionName) {
        Optional<BtfType> f = byName(functionName, BtfKind.FUNC);
        if (f.isEmpty()) return Optional.empty();
        BtfType func = f.get();
        BtfType proto = type(func.type());
        if (proto == null || proto.kind() != BtfKind.FUNC_PROTO) return Optional.empty();
        List<BtfType.Param> ps = proto.params();
        boolean variadic = !ps.isEmpty() && ps.getLast().variadic();
        if (variadic) ps = ps.subList(0, ps.size() - 1);
        return Optional.of(new FuncSignature(functionName, func.id(), proto.id(), proto.sizeOrType(), List.copyOf(ps), variadic, func.linkage()));
    }

    /** A variable the BTF places in a DATASEC (pahole emits per-CPU variables, in {@code .data..percpu}). */
    public Optional<VarLocation> variable(String varName) {
        for (int sec : idsOfKind(BtfKind.DATASEC).toArray()) {
            BtfType t = type(sec);
            for (BtfType.DatasecVar v : t.datasecVars()) {
                BtfType var = type(v.typeId());
                if (var != null && var.name().equals(varName)) {
                    int typeId = var.kind() == BtfKind.VAR ? var.type() : var.id();
                    return Optional.of(new VarLocation(varName, t.name(), var.id(), typeId, v.offset(), v.size()));
                }
            }
        }
        return Optional.empty();
    }

    // ---------------------------------------------------------------- names

    /** A C-like spelling of a type: {@code const char *}, {@code struct open_how *}, {@code char[16]}, {@code int (*)(void *)}. */
    public String typeName(int id) { return typeName(id, 0); }

    private String typeName(int id, int depth) {
        if (depth > MAX_DEPTH) return "...";
        if (id == 0) return "void";
        BtfType t = type(id);
        String n = t.anonymous() ? "(anon)" : t.name();
        return switch (t.kind()) {
            case INT, FLOAT, TYPEDEF, FUNC, VAR, DATASEC, UNKN -> n;
            case STRUCT -> "struct " + n;
            case UNION -> "union " + n;
            case ENUM, ENUM64 -> "enum " + n;
            case FWD -> (t.kindFlag() ? "union " : "struct ") + n;
            case PTR -> {
                BtfType target = t.type() == 0 ? null : resolve(t.type());
                if (target != null && target.kind() == BtfKind.FUNC_PROTO && type(t.type()).kind() == BtfKind.FUNC_PROTO) {
                    yield typeName(target.type(), depth + 1) + " (*)(" + paramList(target, depth + 1) + ")";
                }
                yield typeName(t.type(), depth + 1) + " *";
            }
            case CONST, VOLATILE, RESTRICT -> {
                String q = t.kind() == BtfKind.CONST ? "const" : t.kind() == BtfKind.VOLATILE ? "volatile" : "restrict";
                BtfType inner = t.type() == 0 ? null : type(t.type());
                yield inner != null && inner.kind() == BtfKind.PTR ? typeName(t.type(), depth + 1) + " " + q : q + " " + typeName(t.type(), depth + 1);
            }
            case TYPE_TAG -> typeName(t.type(), depth + 1);
            case ARRAY -> typeName(t.array().elemType(), depth + 1) + "[" + t.array().nelems() + "]";
            case FUNC_PROTO -> typeName(t.type(), depth + 1) + " (" + paramList(t, depth + 1) + ")";
            case DECL_TAG -> "tag " + n;
        };
    }

    private String paramList(BtfType proto, int depth) {
        if (proto.params().isEmpty()) return "void";
        StringBuilder sb = new StringBuilder();
        for (BtfType.Param p : proto.params()) {
            if (!sb.isEmpty()) sb.append(", ");
            sb.append(p.variadic() ? "..." : typeName(p.typeId(), depth));
        }
        return sb.toString();
    }

    @Override
    public String toString() {
        return "Btf[" + source + ", " + typeCount() + " types, " + header.typeLen() + "+" + header.strLen() + " bytes]";
    }
}
