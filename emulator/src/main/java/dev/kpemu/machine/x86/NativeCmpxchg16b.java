package dev.kpemu.machine.x86;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.kpemu.machine.NativeHookFunctions;
import dev.kpemu.unicorn.Unicorn;

/**
 * {@code cmpxchg16b} done in kpemu's native code ({@code kpemu_x86_cmpxchg16b.c}): the engine's
 * CPU model lacks CX16 so Unicorn raises #UD for the instruction (with RFLAGS exact, which its
 * own helper does not get right), and this invalid-instruction hook, added before the machine's
 * Java one, executes it and resumes without an upcall. A fault of the operand (#GP for a
 * misaligned one, #PF) is left for the Java hook: {@link #takeFault}.
 */
final class NativeCmpxchg16b implements AutoCloseable {
    private static final long SIZE = 40;
    private static final MemorySegment HOOK = NativeHookFunctions.find("kpemu_cmpxchg16b", SIZE);
    // struct kpemu_cmpxchg16b's fields
    private static final long HANDLED = 0, FAULT_VECTOR = 8, FAULT_ERROR = 12, FAULT_ADDRESS = 16, CTX = 24, EIP = 32;

    /** A fault the native hook found for the instruction at RIP: the vector, its error code, CR2 for #PF. */
    record Fault(int vector, int errorCode, long address) {}

    private final Arena arena = Arena.ofShared();
    private final MemorySegment state;
    /** RIP is written through it: Unicorn's own RIP write from a hook leaves later memory hooks a stale pc (the C file). */
    private final Unicorn.Context context;

    static boolean available() { return HOOK != null; }

    NativeCmpxchg16b(Unicorn uc, X86ContextLayout layout) {
        context = uc.contextAllocPrefix(layout.privilegeEnd());
        state = arena.allocate(SIZE, 8);
        state.set(JAVA_INT, FAULT_VECTOR, -1);
        state.set(ADDRESS, CTX, context.blob());
        state.set(JAVA_LONG, EIP, layout.eip());
        uc.hookInvalidInstructionNative(HOOK, state, this);
    }

    /** Instructions executed natively so far. */
    long handled() { return state.get(JAVA_LONG, HANDLED); }

    /** The fault of the last #UD's {@code cmpxchg16b}, if any (then cleared). */
    Fault takeFault() {
        int vector = state.get(JAVA_INT, FAULT_VECTOR);
        if (vector < 0) return null;
        state.set(JAVA_INT, FAULT_VECTOR, -1);
        return new Fault(vector, state.get(JAVA_INT, FAULT_ERROR), state.get(JAVA_LONG, FAULT_ADDRESS));
    }

    @Override public void close() {
        context.close();
        if (arena.scope().isAlive()) arena.close();
    }
}
