package dev.kpemu.machine.arm64;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.util.Optional;

import dev.kpemu.natives.NativeLibraries;
import dev.kpemu.unicorn.Unicorn;

/**
 * One engine's hook on arm64 instruction-cache maintenance (SYS, CRn 7), so that the engine runs
 * the code the guest wrote: Unicorn 2.1.4 keeps an engine's translations of code the guest
 * rewrote through another virtual alias of its page (Linux patches its text through the linear
 * map and the fixmap), and Linux follows every such change with IC IVAU or IC IALLU(IS), as the
 * architecture asks (docs/smp-notes.md, "Code written through an alias"). With kpemu's native
 * library the engine calls {@code kpemu_ic_filter} (C): an IC IVAU of an executable address drops
 * the line in this engine there; the Java {@code hook} sees IC IALLU(IS) always, and IC IVAU only
 * when {@link #forwardLineInvalidations} is set (several vCPUs: the others' engines); DC ZVA and
 * the other CRn 7 instructions stay in C. Without the native filter, {@code hook} sees every CRn 7
 * SYS instruction, and an IC IVAU drops nothing in the issuing engine.
 */
final class InstructionCacheHook {
    private static final long FORWARD = 0, FORWARD_DATA = 8, LINE = 16, FORWARD_IVAU = 24;
    private static final MemorySegment FILTER;
    private static final long FILTER_SIZE;

    static {
        SymbolLookup lib = NativeLibraries.load(NativeLibraries.CLOCK);
        Optional<MemorySegment> f = lib.find("kpemu_ic_filter");
        long sz = NativeLibraries.constant(lib, "kpemu_ic_filter_size");
        FILTER = f.isPresent() && sz >= FORWARD_IVAU + 8 ? f.get() : null;
        FILTER_SIZE = sz;
    }

    private final MemorySegment state;      // null without the native filter

    private InstructionCacheHook(MemorySegment state) { this.state = state; }

    /** True when the loaded library has the native filter. */
    static boolean nativeFilter() { return FILTER != null; }

    /** Hooks {@code uc}'s CRn 7 SYS instructions; {@code line} is CTR_EL0's IminLine in bytes. */
    static InstructionCacheHook install(Unicorn uc, long line, Unicorn.SysRegHook hook) {
        if (FILTER == null) {
            uc.hookSysReg(Unicorn.ARM64_INS_SYS, (u, reg, acc) -> acc.crn() == 7 && hook.onSysReg(u, reg, acc));
            return new InstructionCacheHook(null);
        }
        Arena arena = Arena.ofShared();       // the hook's: closed when it is deleted or the engine closed
        MemorySegment stub = uc.sysRegUpcallStub(hook, arena);
        MemorySegment state = arena.allocate(FILTER_SIZE, 16);
        state.fill((byte) 0);
        state.set(ADDRESS, FORWARD, stub);
        state.set(ADDRESS, FORWARD_DATA, MemorySegment.NULL);
        state.set(JAVA_LONG, LINE, line);
        uc.hookInsnNative(Unicorn.ARM64_INS_SYS, FILTER, state, arena, new Object[] {stub, state, hook});
        return new InstructionCacheHook(state);
    }

    /** Whether IC IVAU also reaches the Java hook (after the native drop). */
    void forwardLineInvalidations(boolean forward) {
        if (state != null) state.set(JAVA_INT, FORWARD_IVAU, forward ? 1 : 0);
    }
}
