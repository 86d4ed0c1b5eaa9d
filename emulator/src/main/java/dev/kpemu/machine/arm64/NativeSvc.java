package dev.kpemu.machine.arm64;

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
 * The guest's {@code svc} from EL0 taken by native code ({@code kpemu_arm64_svc.c}, in kpemu's
 * native library) as {@link Arm64Machine#takeException} takes it — ELR/SPSR/ESR_EL1, SP banked,
 * PSTATE EL1h masked, PC at VBAR_EL1 + 0x400 — without an upcall and about fifteen FFM calls per
 * system call. The native hook is the machine's interrupt hook: it takes data and instruction
 * aborts the same way while no trap handler must see them ({@link #forwardAborts}); every other
 * exception (breakpoints, HVC/SMC, an SVC at EL1) goes to the Java hook unchanged, and so does an
 * SVC or abort until the Java path has verified that VBAR_EL1's vector for it is mapped in RAM
 * ({@link #verified}, {@link #verifiedCurrent}).
 */
final class NativeSvc implements AutoCloseable {
    private static final long SIZE = 240;
    private static final MemorySegment HOOK = NativeHookFunctions.find("kpemu_arm64_svc", SIZE);
    // struct kpemu_arm64_svc's fields
    private static final long CTX = 0, SYNDROME = 8, VBAR_OK = 16, FORWARD = 24, FORWARD_DATA = 32, TAKEN = 40, FORWARDED = 48, FROM_CONTEXT = 56,
            PC_CTX = 64, PC = 72, VADDRESS = 80, VBAR_OK_CURRENT = 88, FORWARD_ALL = 96, ABORTS = 104, OWNED_LOW = 112, OWNED_HIGH = 120,
            HITS = 128, RAM_COUNT = 136, RAM = 144;
    private static final int RAM_REGIONS = 4;
    /** RAM regions the hook was last told of ({@link #useRam}); -1: none yet. */
    private int ramRegions = -1;

    /**
     * The hook's state and its upcall stub. Closed with the machine: an automatic arena would never
     * be freed, since the stub's target (this machine's engine and hooks) keeps the arena reachable
     * from the stub itself, and every closed machine would stay on the heap.
     */
    private final Arena arena = Arena.ofShared();
    private final MemorySegment state;
    private final Unicorn.Context context;
    /** The PC is written through it (Arm64Machine.setPc says why). */
    private final Unicorn.Context pcContext;
    private final Unicorn.Hook hook;

    /** True when kpemu's native library has the hook (a library built before it has not). */
    static boolean available() { return HOOK != null; }

    /** Installs the native interrupt hook on {@code uc}; everything it does not take goes to {@code host}. */
    NativeSvc(Unicorn uc, ExceptionStateLayout layout, Unicorn.IntrHook host) {
        context = uc.contextAlloc();
        state = arena.allocate(SIZE, 8);
        state.set(ADDRESS, CTX, context.blob());
        state.set(JAVA_LONG, SYNDROME, layout.syndromeOffset());
        pcContext = uc.contextAllocPrefix(layout.pcOffset() + 8);
        state.set(ADDRESS, PC_CTX, pcContext.blob());
        state.set(JAVA_LONG, PC, layout.pcOffset());
        state.set(JAVA_LONG, VBAR_OK, 0);
        state.set(JAVA_LONG, VADDRESS, layout.vaddressOffset());
        state.set(JAVA_LONG, VBAR_OK_CURRENT, 0);
        state.set(JAVA_INT, FORWARD_ALL, 1);   // until the machine says (forwardAborts)
        state.set(ADDRESS, FORWARD, uc.interruptUpcallStub(host, arena));
        state.set(ADDRESS, FORWARD_DATA, MemorySegment.NULL);
        hook = uc.hookInterruptNative(HOOK, state, this);
    }

    Unicorn.Hook hook() { return hook; }

    /** The Java path found VBAR_EL1 {@code vbar}'s lower-EL synchronous vector mapped in RAM. */
    void verified(long vbar) { state.set(JAVA_LONG, VBAR_OK, vbar); }

    /** The Java path found VBAR_EL1 {@code vbar}'s current-EL (SP_EL1) synchronous vector mapped in RAM. */
    void verifiedCurrent(long vbar) { state.set(JAVA_LONG, VBAR_OK_CURRENT, vbar); }

    /**
     * Which data and instruction aborts go to the Java hook: every one when {@code all} (a trap
     * handler must see every fault), else those whose PC is in {@code [pcLow, pcHigh)} (the trap
     * handler's; empty when equal); {@code -Dkpemu.arm64.nativeAborts=false} keeps them there
     * always (the Java path, for comparisons).
     */
    void forwardAborts(boolean all, long pcLow, long pcHigh) {
        state.set(JAVA_LONG, OWNED_LOW, pcLow);
        state.set(JAVA_LONG, OWNED_HIGH, pcHigh);
        state.set(JAVA_INT, FORWARD_ALL, all || "false".equals(System.getProperty("kpemu.arm64.nativeAborts")) ? 1 : 0);
    }

    /** Lets the hook record probe hits at BRKs in {@code hits}' ring ({@link NativeProbeHits}). */
    void recordHits(NativeProbeHits hits) { state.set(ADDRESS, HITS, hits.state()); }

    /** The context through the PC that the hook writes the PC through. */
    MemorySegment pcContextBlob() { return pcContext.blob(); }

    /** Tells the hook where {@code memory}'s RAM lies in host memory (its page walks read RAM in place) when that changed. */
    void useRam(GuestMemory memory) {
        if (memory.ramRegionCount() == ramRegions) return;
        ramRegions = NativeHookFunctions.writeRamRegions(state, RAM_COUNT, RAM, RAM_REGIONS, memory);
    }

    /** Data and instruction aborts taken natively so far (also in {@link #taken}). */
    long abortsTaken() { return state.get(JAVA_LONG, ABORTS); }

    /** SVCs taken natively so far. */
    long taken() { return state.get(JAVA_LONG, TAKEN); }

    /** SVCs taken natively whose syndrome could not be made from the instruction (read from a saved context instead). */
    long syndromesFromContext() { return state.get(JAVA_LONG, FROM_CONTEXT); }

    /** Starts the native count again (a restored machine's count is the Java side's). */
    void resetTaken() { state.set(JAVA_LONG, TAKEN, 0); }

    @Override public void close() {
        context.close();
        pcContext.close();
        if (arena.scope().isAlive()) arena.close();
    }
}
