package dev.kpemu.kprobes;

import java.util.List;

import dev.kpemu.machine.Machine;

/**
 * Jump optimization plugged into the engine. Linux keeps optprobes inside
 * {@code kernel/kprobes.c}; in kpemu the optimizer lives in module {@code optprobes} and the
 * engine only tells it what happens to probes ({@link Kprobes#attachOptimizer}). Without an
 * optimizer every probe is a breakpoint probe.
 *
 * <p>Text ownership: the engine writes breakpoints and original bytes; the optimizer writes jumps.
 * Before every engine write to guest text the optimizer gets {@link #beforeTextWrite} and puts any
 * optimized site overlapping the write back to its breakpoint form, so the engine always finds the
 * state it expects. All calls come on the emulating thread.
 */
public interface ProbeOptimizer extends AutoCloseable {

    /** What a probe point looks like to the optimizer. */
    record ProbeState(long address, SymbolResolver.SymbolInfo symbol, boolean armed, boolean enabled, boolean postHandler) {}

    /** What the engine offers an attached optimizer. */
    interface Engine {
        Machine machine();

        /** Addresses of every registered probe point (aggregates count once). */
        List<Long> probeAddresses();

        /** Addresses of the registered probe points in [start, end) (unsigned order). */
        default List<Long> probeAddresses(long start, long end) {
            return probeAddresses().stream().filter(a -> Long.compareUnsigned(a, start) >= 0 && Long.compareUnsigned(a, end) < 0).toList();
        }

        /** The probe point at {@code address}, or null. */
        ProbeState probe(long address);

        /** {@code debug.kprobes_optimization}. */
        boolean optimizationAllowed();

        /** Guest text with every breakpoint and optimized site undone ({@code recover_probed_instruction}). */
        byte[] originalText(long va, int len);

        /**
         * Slot memory for a detour of {@code bytes} whose whole range lies within {@code reach}
         * bytes of {@code near} (x86 ±2 GiB, arm64 ±128 MiB); the slot area is mapped if needed.
         * {@link KprobeException} ENOMEM when no such run is free, ERANGE when the area is out of reach.
         */
        long allocateDetour(int bytes, long near, long reach);

        /** Writes detour code (through physical memory) and drops translated code for it. */
        void writeDetour(long va, byte[] code);

        void freeDetour(long va, int bytes);

        /**
         * An optimized probe's hand-off was reached (Linux {@code optimized_callback}): runs the pre
         * handlers of the probe at {@code address} on the live registers, with the ip shown as the
         * breakpoint path shows it and ip changes ignored; counts {@code nmissed} on reentry.
         */
        void optimizedHit(long address);

        /** arm64: simulates the probed instruction at {@code address} on the live registers (sets the pc). */
        void simulate(long address);

        /**
         * Whether {@link #detourFor} of the probe at {@code address} answers a detour changed (it
         * got one or lost it): the engine's hits recorded natively resume where that says.
         */
        void detourChanged(long address);
    }

    /** The probe at {@code address} was registered or changed (children, enable/disable, arming, global switch). */
    void probeChanged(long address);

    /**
     * The engine is about to write guest text over {@code [address, address + length)}: every
     * optimized site overlapping it must be back in its breakpoint form when this returns.
     */
    void beforeTextWrite(long address, int length);

    /** The probe point at {@code address} is gone (its text already restored). */
    void probeRemoved(long address);

    /** A safe point: no handler is running, the guest is stopped; pending jumps may be written. */
    void onSafePoint();

    /**
     * A breakpoint hit on the probe at {@code address} after its handlers ran: where to continue
     * instead of stepping (the detour's displaced code, Linux's {@code setup_detour_execution}), or -1.
     */
    long detourFor(long address);

    /** A fault at {@code pc}: the original address of the displaced instruction whose copy is at {@code pc}, or -1. */
    long originalAddress(long pc);

    /** Replaces optimized-site bytes in {@code buf} (guest text at {@code va}) by the original bytes. */
    void recoverText(long va, byte[] buf);

    /** True when {@code kprobes/list} shows {@code [OPTIMIZED]} for the probe at {@code address}. */
    boolean listedOptimized(long address);

    /** Detaches: every site is already back to its breakpoint form or original text. */
    @Override
    void close();
}
