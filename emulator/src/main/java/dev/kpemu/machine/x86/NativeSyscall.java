package dev.kpemu.machine.x86;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.kpemu.machine.NativeHookFunctions;
import dev.kpemu.unicorn.Unicorn;

/**
 * The guest's {@code syscall} done by native code ({@code kpemu_x86_syscall.c}, in kpemu's
 * native library): what {@link X86Machine}'s Java hook did on every system call — RCX, R11, CS/SS
 * and the CPL from IA32_STAR, RFLAGS masked by IA32_FMASK, RIP from IA32_LSTAR — without an
 * upcall and a dozen FFM calls per call. With EFER.SCE clear it calls the Java hook, which delivers
 * #UD. The CPL and segment caches are edited in a scratch context at {@link X86ContextLayout}'s
 * calibrated offsets, as the Java path does.
 */
final class NativeSyscall implements AutoCloseable {
    private static final long SIZE = 104;
    private static final MemorySegment HOOK = NativeHookFunctions.find("kpemu_syscall", SIZE);
    // struct kpemu_syscall's fields
    private static final long CTX = 0, HFLAGS = 8, CS_CACHE = 16, SS_CACHE = 24, SEG_SELECTOR = 32, SEG_BASE = 36,
            SEG_LIMIT = 40, SEG_FLAGS = 44, HF_CPL_MASK = 48, CODE64_FLAGS = 52, DATA_FLAGS = 56, FORWARD = 64,
            FORWARD_DATA = 72, CALLS = 80, FORWARDED = 88, EIP = 96;

    /**
     * The hook's state and its upcall stub. Closed with the machine: an automatic arena would never
     * be freed, since the stub's target (this machine's engine and hooks) keeps the arena reachable
     * from the stub itself, and every closed machine would stay on the heap.
     */
    private final Arena arena = Arena.ofShared();
    private final MemorySegment state;
    private final Unicorn.Context context;

    /** True when kpemu's native library has the hook (a library built before it has not). */
    static boolean available() { return HOOK != null; }

    /** Hooks {@code syscall} on {@code uc}; {@code onUndefined} runs when EFER.SCE is clear. */
    NativeSyscall(Unicorn uc, X86ContextLayout layout, Unicorn.SyscallHook onUndefined) {
        context = uc.contextAllocPrefix(layout.privilegeEnd());   // the hook edits only the CPL's fields and RIP
        state = arena.allocate(SIZE, 8);
        state.set(ADDRESS, CTX, context.blob());
        state.set(JAVA_LONG, HFLAGS, layout.hflags());
        state.set(JAVA_LONG, CS_CACHE, layout.csCache());
        state.set(JAVA_LONG, SS_CACHE, layout.ssCache());
        state.set(JAVA_INT, SEG_SELECTOR, X86ContextLayout.SEG_SELECTOR);
        state.set(JAVA_INT, SEG_BASE, X86ContextLayout.SEG_BASE);
        state.set(JAVA_INT, SEG_LIMIT, X86ContextLayout.SEG_LIMIT);
        state.set(JAVA_INT, SEG_FLAGS, X86ContextLayout.SEG_FLAGS);
        state.set(JAVA_INT, HF_CPL_MASK, X86ContextLayout.HF_CPL_MASK);
        state.set(JAVA_LONG, EIP, layout.eip());
        state.set(JAVA_INT, CODE64_FLAGS, X86Machine.SEG_FLAGS_CODE64);
        state.set(JAVA_INT, DATA_FLAGS, X86Machine.SEG_FLAGS_DATA);
        state.set(ADDRESS, FORWARD, uc.syscallUpcallStub(onUndefined, arena));
        state.set(ADDRESS, FORWARD_DATA, MemorySegment.NULL);
        uc.hookInsnNative(Unicorn.X86_INS_SYSCALL, HOOK, state, this);
    }

    /** System calls entered natively so far. */
    long calls() { return state.get(JAVA_LONG, CALLS); }

    /** System calls passed to the Java hook (EFER.SCE clear). */
    long forwarded() { return state.get(JAVA_LONG, FORWARDED); }

    @Override public void close() {
        context.close();
        if (arena.scope().isAlive()) arena.close();
    }
}
