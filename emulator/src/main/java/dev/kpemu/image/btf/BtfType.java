package dev.kpemu.image.btf;

import java.util.List;

/**
 * One BTF type record (type id 1..N). The fixed part is {@code name_off}, {@code info}
 * (vlen bits 0..15, kind bits 24..28, kind_flag bit 31) and {@code size}/{@code type}; the
 * kind-specific data that follows it is decoded into the lists and fields below (empty or 0
 * where the kind has none).
 */
public final class BtfType {
    /** INT encoding bits. */
    public static final int INT_SIGNED = 1, INT_CHAR = 2, INT_BOOL = 4;
    /** FUNC linkage (vlen) and VAR linkage. */
    public static final int LINKAGE_STATIC = 0, LINKAGE_GLOBAL = 1, LINKAGE_EXTERN = 2;

    /**
     * A STRUCT/UNION member.
     *
     * @param bitOffset    offset from the start of the enclosing struct, in bits
     * @param bitfieldSize bitfield width in bits, 0 for an ordinary member
     */
    public record Member(String name, int typeId, long bitOffset, int bitfieldSize) {
        public boolean isBitfield() { return bitfieldSize != 0; }
        /** Byte offset (bitOffset / 8, rounded down for bitfields). */
        public long byteOffset() { return bitOffset >>> 3; }
        public boolean anonymous() { return name.isEmpty(); }
    }

    /** A FUNC_PROTO parameter; name is empty in prototypes without names; typeId 0 with empty name means "...". */
    public record Param(String name, int typeId) {
        public boolean variadic() { return typeId == 0 && name.isEmpty(); }
    }

    /** An ENUM/ENUM64 enumerator (ENUM values are sign- or zero-extended per kind_flag). */
    public record Enumerator(String name, long value) {}

    /** The btf_array that follows an ARRAY. */
    public record ArrayInfo(int elemType, int indexType, long nelems) {}

    /** A btf_var_secinfo of a DATASEC: variable (VAR or FUNC) type id, offset in the section, size. */
    public record DatasecVar(int typeId, long offset, long size) {}

    private final int id;
    private final BtfKind kind;
    private final String name;
    private final boolean kindFlag;
    private final int vlen;
    private final int sizeOrType;
    private final List<Member> members;
    private final List<Param> params;
    private final List<Enumerator> enumerators;
    private final ArrayInfo array;
    private final List<DatasecVar> datasecVars;
    /** INT: the encoding word; VAR: linkage; DECL_TAG: component_idx. */
    private final int extra;

    BtfType(int id, BtfKind kind, String name, boolean kindFlag, int vlen, int sizeOrType, List<Member> members,
            List<Param> params, List<Enumerator> enumerators, ArrayInfo array, List<DatasecVar> datasecVars, int extra) {
        this.id = id; this.kind = kind; this.name = name; this.kindFlag = kindFlag; this.vlen = vlen;
        this.sizeOrType = sizeOrType; this.members = members; this.params = params; this.enumerators = enumerators;
        this.array = array; this.datasecVars = datasecVars; this.extra = extra;
    }

    public int id() { return id; }
    public BtfKind kind() { return kind; }
    /** Name ("" for anonymous types and for kinds without names). */
    public String name() { return name; }
    public boolean anonymous() { return name.isEmpty(); }
    public boolean kindFlag() { return kindFlag; }
    /** The raw vlen (member/param/enumerator/var count; FUNC: linkage). */
    public int vlen() { return vlen; }

    /** Byte size, for INT, STRUCT, UNION, ENUM, ENUM64, FLOAT and DATASEC. */
    public long size() {
        return switch (kind) {
            case INT, STRUCT, UNION, ENUM, ENUM64, FLOAT, DATASEC -> sizeOrType & 0xffffffffL;
            default -> throw new IllegalStateException(this + " has no size field");
        };
    }

    /** The referenced type id, for PTR, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FUNC_PROTO (return type), VAR, DECL_TAG, TYPE_TAG. */
    public int type() {
        return switch (kind) {
            case PTR, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FUNC_PROTO, VAR, DECL_TAG, TYPE_TAG -> sizeOrType;
            default -> throw new IllegalStateException(this + " refers to no type");
        };
    }

    /** The raw third word (size or type). */
    public int sizeOrType() { return sizeOrType; }

    public List<Member> members() { return members; }
    public List<Param> params() { return params; }
    public List<Enumerator> enumerators() { return enumerators; }
    /** ARRAY only, else null. */
    public ArrayInfo array() { return array; }
    public List<DatasecVar> datasecVars() { return datasecVars; }

    /** INT: BTF_INT_SIGNED / CHAR / BOOL bits. */
    public int intEncoding() { requireKind(BtfKind.INT); return (extra >>> 24) & 0x0f; }
    /** INT: bit offset of the value inside its storage. */
    public int intOffset() { requireKind(BtfKind.INT); return (extra >>> 16) & 0xff; }
    /** INT: number of value bits. */
    public int intBits() { requireKind(BtfKind.INT); return extra & 0xff; }
    public boolean intSigned() { return (intEncoding() & INT_SIGNED) != 0; }

    /** VAR linkage, or FUNC linkage (its vlen). */
    public int linkage() {
        if (kind == BtfKind.FUNC) return vlen;
        requireKind(BtfKind.VAR);
        return extra;
    }

    /** DECL_TAG: -1 for the declaration itself, else the member/parameter index tagged. */
    public int componentIdx() { requireKind(BtfKind.DECL_TAG); return extra; }

    /** ENUM/ENUM64: kind_flag set means signed values. */
    public boolean enumSigned() { return kind.isEnum() && kindFlag; }

    /** The member with this exact name (no search inside anonymous members), or null. */
    public Member directMember(String memberName) {
        for (Member m : members) if (m.name.equals(memberName)) return m;
        return null;
    }

    private void requireKind(BtfKind k) {
        if (kind != k) throw new IllegalStateException(this + " is not a " + k);
    }

    @Override
    public String toString() {
        return "[" + id + "] " + kind + (name.isEmpty() ? " (anon)" : " '" + name + "'");
    }
}
