package dev.kpemu.unicorn;

/** arm64 system-register encodings (op0, op1, CRn, CRm, op2) used by the host. */
public final class SysRegs {
    private SysRegs() {}

    /** One int per encoding: op0:op1:CRn:CRm:op2 packed as in the MRS/MSR instruction (bits 20..5 >> 5). */
    public static int key(int op0, int op1, int crn, int crm, int op2) {
        return (op0 << 14) | (op1 << 11) | (crn << 7) | (crm << 3) | op2;
    }

    public static final int SCR_EL3 = key(3, 6, 1, 1, 0);
    public static final int HCR_EL2 = key(3, 4, 1, 1, 0);
    public static final int CNTFRQ_EL0 = key(3, 3, 14, 0, 0);
    public static final int CNTPCT_EL0 = key(3, 3, 14, 0, 1);
    public static final int CNTVCT_EL0 = key(3, 3, 14, 0, 2);
    public static final int CNTP_TVAL_EL0 = key(3, 3, 14, 2, 0);
    public static final int CNTP_CTL_EL0 = key(3, 3, 14, 2, 1);
    public static final int CNTP_CVAL_EL0 = key(3, 3, 14, 2, 2);
    public static final int CNTV_TVAL_EL0 = key(3, 3, 14, 3, 0);
    public static final int CNTV_CTL_EL0 = key(3, 3, 14, 3, 1);
    public static final int CNTV_CVAL_EL0 = key(3, 3, 14, 3, 2);
    public static final int CNTKCTL_EL1 = key(3, 0, 14, 1, 0);

    /** Decodes the system-register key from an MRS/MSR (register form) instruction word. */
    public static int keyOf(int insn) {
        return (insn >>> 5) & 0xffff;
    }
}
