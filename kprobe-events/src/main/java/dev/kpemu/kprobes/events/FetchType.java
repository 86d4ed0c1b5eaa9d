package dev.kpemu.kprobes.events;

/**
 * The fetch types of {@code probe_fetch_types[]}: name, stored size, signedness, the type
 * shown in the {@code format} file ({@code fmttype}) and the printf format of the print
 * fmt. Bitfields are stored as their container type ({@code u8}..{@code u64}).
 */
public enum FetchType {
    STRING("string", 4, true, "__data_loc char[]", "\\\"%s\\\""),
    USTRING("ustring", 4, true, "__data_loc char[]", "\\\"%s\\\""),
    SYMSTR("symstr", 4, true, "__data_loc char[]", "\\\"%s\\\""),
    U8("u8", 1, false, "u8", "%u"),
    U16("u16", 2, false, "u16", "%u"),
    U32("u32", 4, false, "u32", "%u"),
    U64("u64", 8, false, "u64", "%Lu"),
    S8("s8", 1, true, "s8", "%d"),
    S16("s16", 2, true, "s16", "%d"),
    S32("s32", 4, true, "s32", "%d"),
    S64("s64", 8, true, "s64", "%Ld"),
    X8("x8", 1, false, "u8", "0x%x"),
    X16("x16", 2, false, "u16", "0x%x"),
    X32("x32", 4, false, "u32", "0x%x"),
    X64("x64", 8, false, "u64", "0x%Lx"),
    CHAR("char", 1, false, "u8", "'%c'"),
    SYMBOL("symbol", 8, false, "u64", "%pS");

    /** {@code DEFAULT_FETCH_TYPE} on 64-bit kernels. */
    public static final FetchType DEFAULT = X64;

    private final String typeName;
    private final int size;
    private final boolean signed;
    private final String fmtType;
    private final String printFmt;

    FetchType(String typeName, int size, boolean signed, String fmtType, String printFmt) {
        this.typeName = typeName;
        this.size = size;
        this.signed = signed;
        this.fmtType = fmtType;
        this.printFmt = printFmt;
    }

    /** The name written after {@code :}. */
    public String typeName() { return typeName; }

    /** Bytes in the event record (4 for the data_loc of string types). */
    public int size() { return size; }

    /** The {@code signed:} column of the format file. */
    public boolean signed() { return signed; }

    /** The field type of the format file. */
    public String fmtType() { return fmtType; }

    /** The conversion used in the format file's print fmt. */
    public String printFmt() { return printFmt; }

    /** Whether the value lives in the dynamic area (string, ustring, symstr). */
    public boolean isString() { return size == 4 && fmtType.startsWith("__data_loc"); }

    /** {@code find_fetch_type} by exact name (no bitfields), or null. */
    static FetchType byName(String name, Dialect dialect) {
        for (FetchType t : values()) {
            if (t.typeName.equals(name)) {
                if (t == SYMSTR && !dialect.symstr) return null;
                if (t == CHAR && !dialect.charType) return null;
                return t;
            }
        }
        return null;
    }
}
