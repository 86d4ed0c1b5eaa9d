package dev.kpemu.kprobes.x86;

/** Test access to package-private x86 helpers. */
public final class X86KprobesAccess {
    private X86KprobesAccess() {}

    public static boolean condition(int cc, long flags) { return X86Kprobes.condition(cc, flags); }
}
