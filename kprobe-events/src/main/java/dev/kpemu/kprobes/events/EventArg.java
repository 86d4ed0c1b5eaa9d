package dev.kpemu.kprobes.events;

import java.util.List;

/**
 * One fetch argument of a recorded event, typed as its {@link FetchType} stores it.
 *
 * <p>{@code value} is a {@link Long} for the number types (the stored bits, sign-extended for
 * {@code s8..s64}, zero-extended otherwise: read a {@code u64}/{@code x64} with
 * {@link Long#toUnsignedString}), for {@code char} and for {@code symbol} (the address); a
 * {@link String} for {@code string}, {@code ustring} and {@code symstr}, or null when the fetch
 * faulted (the trace prints {@code (fault)}); for an array ({@code :type[N]}) a {@link List} of
 * those. {@code symbol} carries what {@code %pS} prints for a {@code symbol}-typed value (null
 * for other types). Strings carry the guest's bytes losslessly ({@link GuestText}: bytes that are
 * not UTF-8 as U+DC80..U+DCFF); {@link #bytes} gives them as bytes.
 */
public record EventArg(String name, FetchType type, int arrayLength, Object value, String symbol) {
    public boolean isArray() { return arrayLength > 0; }

    /** The scalar's stored bits (a number type, {@code char} or {@code symbol}). */
    public long bits() {
        if (!(value instanceof Long l)) throw new IllegalStateException(name + " is not a number");
        return l;
    }

    /**
     * A string argument's bytes as the guest held them (no NUL), or for {@code char} its one
     * byte; null when the fetch faulted.
     */
    public byte[] bytes() {
        if (value instanceof String s) return GuestText.encode(s);
        if (type == FetchType.CHAR && value instanceof Long l) return new byte[] {(byte) (long) l};
        if (value == null) return null;
        throw new IllegalStateException(name + " is neither a string nor a char");
    }

    /** The elements of an array argument. */
    @SuppressWarnings("unchecked")
    public List<Object> elements() {
        if (!(value instanceof List<?> l)) throw new IllegalStateException(name + " is not an array");
        return (List<Object>) l;
    }
}
