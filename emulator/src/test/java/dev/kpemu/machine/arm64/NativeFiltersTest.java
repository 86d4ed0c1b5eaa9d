package dev.kpemu.machine.arm64;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * kpemu's native library carries the arm64 system-instruction filters and the Java side finds them
 * (symbol and struct size, through {@code NativeLibraries.constant}): without them every MRS/MSR, or
 * every DC ZVA, would reach Java, correct but seconds slower a boot.
 */
class NativeFiltersTest {
    @Test
    void theSystemRegisterAndInstructionCacheFiltersAreNative() {
        assertTrue(SysRegHooks.nativeFilter(), "kpemu_sysreg_filter");
        assertTrue(InstructionCacheHook.nativeFilter(), "kpemu_ic_filter");
    }
}
