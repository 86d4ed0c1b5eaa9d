package dev.kpemu.image.btf;

/** The BTF_KIND_* values (bits 24..28 of a type's {@code info} word). */
public enum BtfKind {
    UNKN(0), INT(1), PTR(2), ARRAY(3), STRUCT(4), UNION(5), ENUM(6), FWD(7), TYPEDEF(8), VOLATILE(9),
    CONST(10), RESTRICT(11), FUNC(12), FUNC_PROTO(13), VAR(14), DATASEC(15), FLOAT(16), DECL_TAG(17),
    TYPE_TAG(18), ENUM64(19);

    private static final BtfKind[] BY_CODE = values();

    private final int code;

    BtfKind(int code) { this.code = code; }

    public int code() { return code; }

    /** The kind with this code, or null when the code is not a known kind. */
    public static BtfKind ofCode(int code) {
        return code > 0 && code < BY_CODE.length ? BY_CODE[code] : null;
    }

    /** Modifiers that {@link Btf#resolve} looks through: typedef, const, volatile, restrict, type tag. */
    public boolean isModifier() {
        return this == TYPEDEF || this == CONST || this == VOLATILE || this == RESTRICT || this == TYPE_TAG;
    }

    /** STRUCT or UNION. */
    public boolean isComposite() { return this == STRUCT || this == UNION; }

    /** ENUM or ENUM64. */
    public boolean isEnum() { return this == ENUM || this == ENUM64; }
}
