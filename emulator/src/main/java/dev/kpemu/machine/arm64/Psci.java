package dev.kpemu.machine.arm64;

import dev.kpemu.machine.StopReason;
import dev.kpemu.unicorn.Arm64Reg;

/**
 * The PSCI firmware interface (ARM DEN 0022), over the HVC/SMC conduit: function id in x0,
 * result in x0. A single-CPU machine: only what one CPU can do is implemented.
 */
public final class Psci implements Arm64Machine.HypercallHandler {
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
    public static final long SUCCESS = 0, NOT_SUPPORTED = -1, INVALID_PARAMETERS = -2;
    /** MIGRATE_INFO_TYPE: "Trusted OS not present or does not require migration". */
    public static final long TOS_NOT_PRESENT_MP = 2;

    @Override
    public void onHypercall(Arm64Machine m, int imm16, boolean smc) {
        int fn = (int) m.engine().regRead(Arm64Reg.X0);
        long result = switch (fn) {
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
            default -> NOT_SUPPORTED;
        };
        m.engine().regWrite(Arm64Reg.X0, result);
    }

    private static boolean supported(int fn) {
        return fn == VERSION || fn == SYSTEM_OFF || fn == SYSTEM_RESET || fn == MIGRATE_INFO_TYPE || fn == FEATURES;
    }
}
