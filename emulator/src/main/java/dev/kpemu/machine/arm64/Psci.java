package dev.kpemu.machine.arm64;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import java.util.Arrays;
import java.util.function.IntSupplier;

import dev.kpemu.machine.Stateful;
import dev.kpemu.machine.StopReason;
import dev.kpemu.unicorn.Arm64Reg;

/**
 * The PSCI firmware interface (ARM DEN 0022), over the HVC/SMC conduit: function id in x0,
 * arguments in x1-x3, result in x0. Always: PSCI_VERSION (1.0), PSCI_FEATURES,
 * MIGRATE_INFO_TYPE, SYSTEM_OFF and SYSTEM_RESET (requests to stop the machine).
 *
 * <p>{@link #Psci()} is the one-PE firmware kpemu's single-CPU board has: nothing else (CPU_ON,
 * CPU_OFF, AFFINITY_INFO answer NOT_SUPPORTED). {@link #Psci(int, CpuControl, IntSupplier)} adds
 * the power control of {@code pes} PEs, as QEMU's firmware emulation does it: PE {@code i}'s
 * MPIDR affinity is {@link #mpidr(int)} (QEMU {@code virt} with a GICv2: Aff0 = i mod 8,
 * Aff1 = i / 8), PE 0 starts on and the others off.
 * <ul>
 * <li>CPU_ON (target MPIDR, entry, context id): INVALID_PARAMETERS when no PE has that affinity
 *   (bits outside Aff0-Aff3 must be zero) or the entry is not 4-byte aligned (QEMU's answer; the
 *   architecture would allow INVALID_ADDRESS), ALREADY_ON when the target is on, ON_PENDING when
 *   an earlier CPU_ON to it is not done yet; otherwise SUCCESS, the target becomes ON_PENDING and
 *   the request goes to {@link CpuControl#cpuOn}. The 32-bit function ignores the arguments'
 *   upper halves (SMC Calling Convention).</li>
 * <li>CPU_OFF: the calling PE becomes OFF and {@link CpuControl#cpuOff} is told; it does not
 *   return (x0 is left alone).</li>
 * <li>AFFINITY_INFO (target, lowest affinity level): level 0, the PE's state ON 0, OFF 1,
 *   ON_PENDING 2 (INVALID_PARAMETERS for an unknown target); higher levels are always ON
 *   (QEMU's answer: one cluster).</li>
 * <li>PSCI_FEATURES reports these three as well.</li>
 * </ul>
 * Not modelled: CPU_SUSPEND, SYSTEM_SUSPEND, MIGRATE, CPU_FREEZE, SYSTEM_RESET2, the
 * CPU_ON/CPU_OFF race DENIED answers. The requests come from inside the calling PE's hypercall
 * hook: the {@link CpuControl} records them and the machine acts at its next safe point.
 */
public final class Psci implements Arm64Machine.HypercallHandler, Stateful {
    public static final int VERSION = 0x8400_0000;
    public static final int CPU_SUSPEND_32 = 0x8400_0001, CPU_SUSPEND_64 = 0xc400_0001;
    public static final int CPU_OFF = 0x8400_0002;
    public static final int CPU_ON_32 = 0x8400_0003, CPU_ON_64 = 0xc400_0003;
    public static final int AFFINITY_INFO_32 = 0x8400_0004, AFFINITY_INFO_64 = 0xc400_0004;
    public static final int MIGRATE_INFO_TYPE = 0x8400_0006;
    public static final int SYSTEM_OFF = 0x8400_0008;
    public static final int SYSTEM_RESET = 0x8400_0009;
    public static final int FEATURES = 0x8400_000a;

    /** PSCI 1.0 (major 1 in bits 31:16, minor 0). */
    public static final long VERSION_1_0 = 0x1_0000L;
    /** Return codes (DEN 0022 table "Return error codes"). */
    public static final long SUCCESS = 0, NOT_SUPPORTED = -1, INVALID_PARAMETERS = -2, DENIED = -3,
            ALREADY_ON = -4, ON_PENDING = -5, INTERNAL_FAILURE = -6;
    /** AFFINITY_INFO's answers. */
    public static final long AFFINITY_ON = 0, AFFINITY_OFF = 1, AFFINITY_ON_PENDING = 2;
    /** MIGRATE_INFO_TYPE: "Trusted OS not present or does not require migration". */
    public static final long TOS_NOT_PRESENT_MP = 2;
    /** The MPIDR fields that name a PE: Aff3 (39:32), Aff2-Aff0 (23:0). */
    public static final long MPIDR_AFFINITY_MASK = 0xff_00ff_ffffL;
    /** PEs per cluster (Aff0 values) on QEMU's {@code virt} with a GICv2. */
    public static final int CLUSTER_SIZE = 8;

    /** What PSCI asks of the machine: start and stop PEs. Called from the caller's hypercall hook. */
    public interface CpuControl {
        /**
         * CPU_ON accepted: at the next safe point, reset PE {@code pe}, start it at EL1 in AArch64
         * at {@code entry} with x0 = {@code contextId} (MMU and caches off, interrupts masked), then
         * call {@link Psci#started}.
         */
        void cpuOn(int pe, long entry, long contextId);

        /** CPU_OFF by PE {@code pe}: stop it before its next instruction; it runs again only after a CPU_ON. */
        void cpuOff(int pe);

        CpuControl NONE = new CpuControl() {
            @Override public void cpuOn(int pe, long entry, long contextId) {}
            @Override public void cpuOff(int pe) {}
        };
    }

    /** A PE's power state, with AFFINITY_INFO's numbering. */
    public enum PowerState { ON, OFF, ON_PENDING }

    private final int pes;
    private final CpuControl control;
    private final IntSupplier currentPe;
    private final PowerState[] state;
    private final long[] pendingEntry, pendingContext;

    /** The one-PE firmware: version, features, system off and reset. */
    public Psci() {
        this.pes = 1;
        this.control = null;
        this.currentPe = () -> 0;
        this.state = new PowerState[] {PowerState.ON};
        this.pendingEntry = new long[1];
        this.pendingContext = new long[1];
    }

    /**
     * The firmware of {@code pes} PEs (1 to 8) with CPU power control: start and stop requests go
     * to {@code control}; {@code currentPe} names the calling PE (the vCPU whose hook runs).
     */
    public Psci(int pes, CpuControl control, IntSupplier currentPe) {
        if (pes < 1 || pes > 8) throw new IllegalArgumentException("PSCI PEs: " + pes);
        this.pes = pes;
        this.control = java.util.Objects.requireNonNull(control);
        this.currentPe = java.util.Objects.requireNonNull(currentPe);
        this.state = new PowerState[pes];
        this.pendingEntry = new long[pes];
        this.pendingContext = new long[pes];
        reset();
    }

    /** PE 0 on, the others off. */
    public void reset() {
        Arrays.fill(state, PowerState.OFF);
        state[0] = PowerState.ON;
        Arrays.fill(pendingEntry, 0);
        Arrays.fill(pendingContext, 0);
    }

    public int pes() { return pes; }

    /** The MPIDR affinity fields of PE {@code pe} (the device tree's {@code reg}). */
    public static long mpidr(int pe) {
        return (long) (pe / CLUSTER_SIZE) << 8 | pe % CLUSTER_SIZE;
    }

    /** The PE whose affinity is {@code target}, or -1. */
    public int peOf(long target) {
        for (int i = 0; i < pes; i++) if (mpidr(i) == target) return i;
        return -1;
    }

    public PowerState state(int pe) { return state[pe]; }

    /** The machine has started PE {@code pe} after {@link CpuControl#cpuOn}: it is ON. */
    public void started(int pe) {
        if (state[pe] != PowerState.ON_PENDING) throw new IllegalStateException("PE " + pe + " was not being started: " + state[pe]);
        state[pe] = PowerState.ON;
    }

    /** The entry point and context id of PE {@code pe}'s pending CPU_ON. */
    public long pendingEntry(int pe) { return pendingEntry[pe]; }

    public long pendingContextId(int pe) { return pendingContext[pe]; }

    @Override
    public void onHypercall(Arm64Machine m, int imm16, boolean smc) {
        int fn = (int) m.engine().regRead(Arm64Reg.X0);
        Long result = call(m, fn);
        if (result != null) m.engine().regWrite(Arm64Reg.X0, result);
    }

    /** Function {@code fn} with the arguments in x1-x3; the result for x0, or null when the call does not return. */
    private Long call(Arm64Machine m, int fn) {
        boolean power = control != null;
        return switch (fn) {
            case VERSION -> VERSION_1_0;
            case SYSTEM_OFF -> {
                m.requestStop(new StopReason.PoweredOff(0));
                yield SUCCESS;
            }
            case SYSTEM_RESET -> {
                m.requestStop(new StopReason.Reset());
                yield SUCCESS;
            }
            case MIGRATE_INFO_TYPE -> TOS_NOT_PRESENT_MP;
            case FEATURES -> supported((int) m.engine().regRead(Arm64Reg.X1)) ? SUCCESS : NOT_SUPPORTED;
            case CPU_ON_32, CPU_ON_64 -> {
                if (!power) yield NOT_SUPPORTED;
                long mask = fn == CPU_ON_32 ? 0xffff_ffffL : -1L;
                yield cpuOn(m.engine().regRead(Arm64Reg.X1) & mask, m.engine().regRead(Arm64Reg.X2) & mask,
                        m.engine().regRead(Arm64Reg.X3) & mask);
            }
            case CPU_OFF -> {
                if (!power) yield NOT_SUPPORTED;
                cpuOff(caller());
                yield null;
            }
            case AFFINITY_INFO_32, AFFINITY_INFO_64 -> {
                if (!power) yield NOT_SUPPORTED;
                long mask = fn == AFFINITY_INFO_32 ? 0xffff_ffffL : -1L;
                yield affinityInfo(m.engine().regRead(Arm64Reg.X1) & mask, m.engine().regRead(Arm64Reg.X2) & mask);
            }
            default -> NOT_SUPPORTED;
        };
    }

    private int caller() {
        int pe = currentPe.getAsInt();
        if (pe < 0 || pe >= pes) throw new IllegalStateException("PSCI call from PE " + pe + " of " + pes);
        return pe;
    }

    /** CPU_ON: the return code. */
    public long cpuOn(long target, long entry, long contextId) {
        int pe = peOf(target);
        if (pe < 0 || (entry & 3) != 0) return INVALID_PARAMETERS;
        if (state[pe] == PowerState.ON) return ALREADY_ON;
        if (state[pe] == PowerState.ON_PENDING) return ON_PENDING;
        state[pe] = PowerState.ON_PENDING;
        pendingEntry[pe] = entry;
        pendingContext[pe] = contextId;
        control.cpuOn(pe, entry, contextId);
        return SUCCESS;
    }

    /** CPU_OFF by PE {@code pe}. */
    public void cpuOff(int pe) {
        state[pe] = PowerState.OFF;
        control.cpuOff(pe);
    }

    /** AFFINITY_INFO: the state or a return code. */
    public long affinityInfo(long target, long lowestLevel) {
        if (lowestLevel != 0) return AFFINITY_ON;
        int pe = peOf(target);
        if (pe < 0) return INVALID_PARAMETERS;
        return state[pe].ordinal();
    }

    private boolean supported(int fn) {
        return fn == VERSION || fn == SYSTEM_OFF || fn == SYSTEM_RESET || fn == MIGRATE_INFO_TYPE || fn == FEATURES
                || control != null && (fn == CPU_ON_32 || fn == CPU_ON_64 || fn == CPU_OFF
                        || fn == AFFINITY_INFO_32 || fn == AFFINITY_INFO_64);
    }

    // ------------------------------------------------------------------ snapshot state

    @Override
    public void saveState(DataOutput out) throws IOException {
        out.writeInt(pes);
        for (int i = 0; i < pes; i++) {
            out.writeByte(state[i].ordinal());
            out.writeLong(pendingEntry[i]);
            out.writeLong(pendingContext[i]);
        }
    }

    @Override
    public void restoreState(DataInput in) throws IOException {
        int n = in.readInt();
        if (n != pes) throw new IOException("PSCI state for " + n + " PEs, this machine has " + pes);
        PowerState[] states = PowerState.values();
        for (int i = 0; i < pes; i++) {
            int s = in.readUnsignedByte();
            if (s >= states.length) throw new IOException("PSCI power state out of range");
            state[i] = states[s];
            pendingEntry[i] = in.readLong();
            pendingContext[i] = in.readLong();
        }
    }
}
