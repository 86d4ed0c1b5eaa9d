package dev.kpemu.machine.x86;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.kpemu.machine.GuestMemory;
import dev.kpemu.machine.NativeHookFunctions;
import dev.kpemu.machine.NativeProbeHits;
import dev.kpemu.unicorn.Unicorn;

/**
 * Guest faults delivered by native code ({@code kpemu_x86_exception.c}, in kpemu's native library)
 * as {@link X86Machine}'s Java path delivers them — the gate from the IDT, the IST or TSS stack,
 * the pushed frame with QEMU's error code, RFLAGS, CS, SS and the CPL — without an upcall, a whole
 * context save and restore and some twenty FFM calls per page fault. The native hook is the
 * machine's interrupt hook: it takes #DE and the faults with an error code but #DF (#TS, #NP, #SS,
 * #GP, #PF, #AC) and passes everything else to the Java hook unchanged, and so every exception while
 * {@link #forward} says so (a consumer must see each one: the exception trace, a trap handler that
 * owns every fault), a fault whose RIP is in the trap handler's range (the kprobes engine's slot
 * area), a frame that would be written into guarded text's physical pages, and every delivery the Java path would end in an error (an unmapped IDT, GDT, TSS or stack, a gate
 * not present, a vector beyond the IDT limit).
 */
final class NativeExceptions implements AutoCloseable {
    private static final long SIZE = 264;
    private static final MemorySegment HOOK = NativeHookFunctions.find("kpemu_x86_exception", SIZE);
    // struct kpemu_x86_exception's fields
    private static final long CTX = 0, ERROR_CODE = 8, OLD_EXCEPTION = 16, HFLAGS = 24, CS_CACHE = 32, SS_CACHE = 40, EIP = 48,
            SEG_SELECTOR = 56, SEG_BASE = 60, SEG_LIMIT = 64, SEG_FLAGS = 68, HF_CPL_MASK = 72, CODE64_FLAGS = 76,
            NATIVE_VECTORS = 80, FORWARD_ALL = 84, FORWARD = 88, FORWARD_DATA = 96, DELIVERED = 104, FORWARDED = 112,
            RAM_COUNT = 120, RAM = 128, OWNED_LOW = 224, OWNED_HIGH = 232, FRAME_LOW = 240, FRAME_HIGH = 248, HITS = 256;
    private static final int RAM_REGIONS = 4;
    /** The vectors delivered natively: #DE, #TS, #NP, #SS, #GP, #PF, #AC (X86Machine.onException treats them alike). */
    static final int VECTORS = 1 << X86Machine.VEC_DE | 1 << X86Machine.VEC_TS | 1 << X86Machine.VEC_NP | 1 << X86Machine.VEC_SS
            | 1 << X86Machine.VEC_GP | 1 << X86Machine.VEC_PF | 1 << X86Machine.VEC_AC;

    /**
     * The hook's state and its upcall stub. Closed with the machine: an automatic arena would never
     * be freed, since the stub's target (this machine's engine and hooks) keeps the arena reachable
     * from the stub itself, and every closed machine would stay on the heap.
     */
    private final Arena arena = Arena.ofShared();
    private final MemorySegment state;
    private final Unicorn.Context context;
    private int ramRegions = -1;

    /**
     * True when kpemu's native library has the hook (a library built before it has not) and
     * {@code -Dkpemu.x86.nativeExceptions=false} does not turn it off (the Java path, for comparisons).
     */
    static boolean available() { return HOOK != null && !"false".equals(System.getProperty("kpemu.x86.nativeExceptions")); }

    /** Installs the native interrupt hook on {@code uc}; everything it does not deliver goes to {@code host}. */
    NativeExceptions(Unicorn uc, X86ContextLayout layout, Unicorn.IntrHook host) {
        context = uc.contextAlloc();   // QEMU's error code and exception marker lie deep in the CPU state
        state = arena.allocate(SIZE, 8);
        state.set(ADDRESS, CTX, context.blob());
        state.set(JAVA_LONG, ERROR_CODE, layout.errorCode());
        state.set(JAVA_LONG, OLD_EXCEPTION, layout.oldException());
        state.set(JAVA_LONG, HFLAGS, layout.hflags());
        state.set(JAVA_LONG, CS_CACHE, layout.csCache());
        state.set(JAVA_LONG, SS_CACHE, layout.ssCache());
        state.set(JAVA_LONG, EIP, layout.eip());
        state.set(JAVA_INT, SEG_SELECTOR, X86ContextLayout.SEG_SELECTOR);
        state.set(JAVA_INT, SEG_BASE, X86ContextLayout.SEG_BASE);
        state.set(JAVA_INT, SEG_LIMIT, X86ContextLayout.SEG_LIMIT);
        state.set(JAVA_INT, SEG_FLAGS, X86ContextLayout.SEG_FLAGS);
        state.set(JAVA_INT, HF_CPL_MASK, X86ContextLayout.HF_CPL_MASK);
        state.set(JAVA_INT, CODE64_FLAGS, X86Machine.SEG_FLAGS_CODE64);
        state.set(JAVA_INT, NATIVE_VECTORS, VECTORS);
        state.set(JAVA_INT, FORWARD_ALL, 1);   // until the machine says (forwardAll)
        state.set(ADDRESS, FORWARD, uc.interruptUpcallStub(host, arena));
        state.set(ADDRESS, FORWARD_DATA, MemorySegment.NULL);
        state.set(JAVA_INT, RAM_COUNT, 0);
        state.set(ADDRESS, HITS, MemorySegment.NULL);
        uc.hookInterruptNative(HOOK, state, this);
    }

    /**
     * Which exceptions go to the Java hook: every one when {@code all}; else those whose RIP is in
     * {@code [pcLow, pcHigh)} and those whose frame would touch guest-physical {@code [frameLow, frameHigh)}
     * (empty ranges: low == high).
     */
    void forward(boolean all, long pcLow, long pcHigh, long frameLow, long frameHigh) {
        state.set(JAVA_LONG, OWNED_LOW, pcLow);
        state.set(JAVA_LONG, OWNED_HIGH, pcHigh);
        state.set(JAVA_LONG, FRAME_LOW, frameLow);
        state.set(JAVA_LONG, FRAME_HIGH, frameHigh);
        state.set(JAVA_INT, FORWARD_ALL, all ? 1 : 0);
    }

    /**
     * Tells the hook where {@code memory}'s RAM lies in host memory (its page walks read RAM in
     * place; elsewhere they read through the engine) when its RAM regions changed since the last call.
     */
    void useRam(GuestMemory memory) {
        if (memory.ramRegionCount() == ramRegions) return;
        ramRegions = NativeHookFunctions.writeRamRegions(state, RAM_COUNT, RAM, RAM_REGIONS, memory);
    }

    /** Lets the hook record probe hits in {@code hits}' ring ({@link NativeProbeHits}). */
    void recordHits(NativeProbeHits hits) { state.set(ADDRESS, HITS, hits.state()); }

    /** Exceptions delivered natively so far. */
    long delivered() { return state.get(JAVA_LONG, DELIVERED); }

    /** Exceptions passed to the Java hook so far. */
    long forwarded() { return state.get(JAVA_LONG, FORWARDED); }

    /** Starts the native count again (a restored machine's count is the Java side's). */
    void resetDelivered() { state.set(JAVA_LONG, DELIVERED, 0); }

    @Override public void close() {
        context.close();
        if (arena.scope().isAlive()) arena.close();
    }
}
