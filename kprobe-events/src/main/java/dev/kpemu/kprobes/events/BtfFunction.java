package dev.kpemu.kprobes.events;

import java.util.List;

import dev.kpemu.image.btf.Btf;
import dev.kpemu.image.btf.BtfKind;
import dev.kpemu.image.btf.BtfType;

/**
 * A probed function's BTF as trace_probe's {@code query_btf_context} sees it: the prototype of
 * the first {@code FUNC} with that name ({@code btf_find_func_proto}), its parameters and
 * return type, and the member lookup {@code btf_find_struct_member} does through anonymous
 * structs and unions.
 */
final class BtfFunction {
    /** A member found inside a struct: its declared type, bit offset (anonymous parents included) and bitfield width. */
    record Member(int typeId, long bitOffset, int bitfieldSize) {}

    final Btf btf;
    private final BtfType proto;
    private final int hidden;

    private BtfFunction(Btf btf, BtfType proto, int hidden) {
        this.btf = btf;
        this.proto = proto;
        this.hidden = hidden;
    }

    /** A tracepoint's probestub as {@code query_btf_context} sees it with TPARG_FL_TPOINT: its first ('data') parameter hidden. */
    BtfFunction withoutFirstParam() {
        return proto.params().isEmpty() ? this : new BtfFunction(btf, proto, hidden + 1);
    }

    /** The function's prototype, or null when the kernel has no BTF or no FUNC of that name. */
    static BtfFunction find(KernelSymbols symbols, String function) {
        Btf btf = symbols.btf();
        if (btf == null || function == null) return null;
        var f = btf.byName(function, BtfKind.FUNC);
        if (f.isEmpty()) return null;
        BtfType proto = btf.type(f.get().type());
        if (proto == null || proto.kind() != BtfKind.FUNC_PROTO) return null;
        return new BtfFunction(btf, proto, 0);
    }

    /** {@code btf_type_vlen(proto)}: the parameters, a trailing {@code ...} included. */
    List<BtfType.Param> params() { return proto.params().subList(hidden, proto.params().size()); }

    /** The return type id, 0 for void. */
    int returnTypeId() { return proto.type(); }

    /** {@code btf_type_skip_modifiers}: null for void. */
    BtfType skipModifiers(int id) { return btf.resolve(id); }

    /** {@code btf_find_struct_member}: null when {@code composite} has no member of that name. */
    Member member(BtfType composite, String name) {
        return btf.member(composite, name).map(f -> new Member(f.typeId(), f.bitOffset(), f.bitfieldSize())).orElse(null);
    }

    /**
     * {@code btf_type_is_char_ptr}: whether the type {@code t}'s third word names (through modifiers)
     * is an unsigned 8-bit integer. Linux does not check that {@code t} is a pointer: for an integer
     * the word is its size, read as a type id (recorded: Debian's 6.12 takes {@code $retval:string}
     * of a {@code long} function, whose BTF type 8 is an unsigned char; 7.2's BTF differs there).
     */
    boolean isCharPointer(BtfType t) {
        int id = t.sizeOrType();
        if (id <= 0 || id > btf.typeCount()) return false;
        return isUnsignedByte(skipModifiers(id));
    }

    /** {@code btf_type_is_char_array}: an array of unsigned 8-bit integers. */
    boolean isCharArray(BtfType t) {
        if (t.kind() != BtfKind.ARRAY) return false;
        return isUnsignedByte(skipModifiers(t.array().elemType()));
    }

    private static boolean isUnsignedByte(BtfType t) {
        return t != null && t.kind() == BtfKind.INT && (t.intEncoding() & BtfType.INT_SIGNED) == 0 && t.intBits() == 8;
    }

    /**
     * {@code fetch_type_from_btf_type}: the fetch type of an untyped argument of BTF type {@code t},
     * or null (then the default {@code x64}). An unsigned integer of an odd width is fetched as
     * {@code u64} and reported through {@code bitfield} ({width, offset inside the word}).
     */
    static FetchType fetchType(BtfType t, int[] bitfield) {
        return switch (t.kind()) {
            case ENUM -> FetchType.S32;
            case ENUM64 -> FetchType.S64;
            case PTR -> FetchType.X64;
            case INT -> {
                boolean signed = (t.intEncoding() & BtfType.INT_SIGNED) != 0;
                FetchType f = switch (t.intBits()) {
                    case 8 -> signed ? FetchType.S8 : FetchType.U8;
                    case 16 -> signed ? FetchType.S16 : FetchType.U16;
                    case 32 -> signed ? FetchType.S32 : FetchType.U32;
                    case 64 -> signed ? FetchType.S64 : FetchType.U64;
                    default -> null;
                };
                if (f == null && !signed) {
                    bitfield[0] = t.intBits();
                    bitfield[1] += t.intOffset();
                    f = FetchType.U64;
                }
                yield f;
            }
            default -> null;
        };
    }
}
