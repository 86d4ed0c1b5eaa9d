package dev.kpemu.kprobes.events;

/**
 * One fetch argument: {@code name=expression}. {@code expression} is the text after
 * {@code =} as written (the kernel's {@code comm}: listing and multiprobe matching use it),
 * {@code expr} its parsed form, {@code type} the stored type (a bitfield's container type when
 * {@code bitfield} is set), {@code arrayLength} 0 for scalars, and {@code program} the
 * compiled fetch plan.
 */
public record FetchArg(String name, String expression, FetchExpr expr, FetchType type,
                       Bitfield bitfield, int arrayLength, FetchProgram program) {
    /** Bytes in the fixed part of the record. */
    public int fieldSize() { return type.size() * Math.max(1, arrayLength); }

    /** The format-file field type ({@code u8[4]}, {@code __data_loc char[]}, ...). */
    public String fieldType() {
        return arrayLength > 0 ? type.fmtType() + "[" + arrayLength + "]" : type.fmtType();
    }
}
