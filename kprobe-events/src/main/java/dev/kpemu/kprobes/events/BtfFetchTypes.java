package dev.kpemu.kprobes.events;

import java.util.Optional;

import dev.kpemu.image.btf.Btf;
import dev.kpemu.image.btf.BtfKind;
import dev.kpemu.image.btf.BtfType;

/**
 * Linux's {@code fetch_type_from_btf_type}: the fetch type a BTF type gives an untyped argument
 * (typedefs and qualifiers resolved): enums are {@code s32} ({@code s64} for 64-bit enums),
 * pointers {@code x64}, integers {@code s}/{@code u} of their width; anything else has none.
 */
final class BtfFetchTypes {
    private BtfFetchTypes() {}

    static Optional<FetchType> of(Btf btf, int typeId) {
        BtfType t = btf.resolve(typeId);
        if (t == null) return Optional.empty();                 // void
        return Optional.ofNullable(switch (t.kind()) {
            case ENUM -> FetchType.S32;
            case ENUM64 -> FetchType.S64;
            case PTR -> FetchType.X64;
            case INT -> integer(t);
            default -> null;
        });
    }

    private static FetchType integer(BtfType t) {
        boolean signed = (t.intEncoding() & BtfType.INT_SIGNED) != 0;
        return switch (t.intBits()) {
            case 8 -> signed ? FetchType.S8 : FetchType.U8;
            case 16 -> signed ? FetchType.S16 : FetchType.U16;
            case 32 -> signed ? FetchType.S32 : FetchType.U32;
            case 64 -> signed ? FetchType.S64 : FetchType.U64;
            default -> null;
        };
    }

    /** The return type of {@code function} as an untyped {@code $retval} gets it, if its BTF prototype is known. */
    static Optional<FetchType> returnType(Btf btf, String function) {
        return btf.funcProto(function).flatMap(sig -> of(btf, sig.returnTypeId()));
    }
}
