package dev.kpemu.machine.x86;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.board.X86Pc;

/**
 * The CPU the x86 guest sees: QEMU's qemu64 (what the reference machine runs by default), not the
 * Haswell-like model Unicorn 2.1.4 opens by default, and nothing that hands it host state.
 */
class X86CpuidTest {
    @Test
    void guestSeesQemu64WithoutHostRandomOrTsc() {
        X86Cpuid c = X86Pc.cpuPolicy(X86Cpuid.probe(), false);
        X86Cpuid.Leaf l1 = c.get(1, 0);
        // qemu64: family 6, model 6, stepping 3 (QEMU's "QEMU Virtual CPU version 2.5+")
        assertEquals(0x663, l1.eax(), "family/model/stepping");
        assertEquals(0, l1.ecx() & X86Cpuid.L1_ECX_RDRAND, "no RDRAND");
        assertEquals(0, c.get(7, 0).ebx() & X86Cpuid.L7_EBX_RDSEED, "no RDSEED");
        assertEquals(0, l1.edx() & X86Cpuid.L1_EDX_TSC, "no TSC bit");
        assertEquals(0, l1.edx() & X86Cpuid.L1_EDX_APIC, "no local APIC");
        assertEquals(0, c.get(0x8000_0001, 0).edx() & X86Cpuid.EXT1_EDX_RDTSCP, "no RDTSCP");
    }
}
