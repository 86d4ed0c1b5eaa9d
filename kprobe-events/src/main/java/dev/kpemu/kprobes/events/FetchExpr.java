package dev.kpemu.kprobes.events;

/** The expression of one fetch argument, as written (before the {@code :TYPE}). */
public sealed interface FetchExpr {
    /** {@code %REG}. */
    record Reg(RegisterSet.Register register) implements FetchExpr {}
    /** {@code $stack}: the stack pointer value. */
    record StackPointer() implements FetchExpr {}
    /** {@code $stackN}: the N-th word on the kernel stack. */
    record StackEntry(int index) implements FetchExpr {}
    /** {@code $argN} (N from 1). */
    record Argument(int number) implements FetchExpr {}
    /** A parameter of the probed function by its BTF name ({@code number} from 1). */
    record Parameter(String name, int number) implements FetchExpr {}
    /** {@code $retval}. */
    record ReturnValue() implements FetchExpr {}
    /** {@code $addr} of a wprobe: the watched address. */
    record WatchAddress() implements FetchExpr {}
    /** {@code $comm} / {@code $COMM}. */
    record Comm() implements FetchExpr {}
    /** {@code \IMM}. */
    record Immediate(long value) implements FetchExpr {}
    /** {@code \"text"} (the text without quotes, decoded as UTF-8). */
    record ImmediateString(String text) implements FetchExpr {}
    /** {@code @ADDR}: memory at an absolute kernel address. */
    record AbsoluteMemory(long address) implements FetchExpr {}
    /** {@code @SYM[+|-off]}: memory at a data symbol; {@code spec} is the text after {@code @}, resolved at registration. */
    record SymbolMemory(String spec) implements FetchExpr {}
    /** {@code @+OFFS} (uprobes): memory at file offset OFFS of the probed file, where this process maps it. */
    record FileOffset(long offset) implements FetchExpr {}
    /** {@code +|-[u]OFFS(BASE)}: the word at BASE+OFFS (user memory when {@code user}). */
    record Deref(FetchExpr base, long offset, boolean user) implements FetchExpr {}
}
