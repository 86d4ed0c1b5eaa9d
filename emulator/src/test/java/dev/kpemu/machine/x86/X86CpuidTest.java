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
        // QEMU 7.2's qemu64 as Linux under QEMU reports it (reference/x86_64/6.12/cpu.view:
        // "family: 0xf, model: 0x6b, stepping: 0x1"), not Unicorn's older 6/6/3
        assertEquals(0x60fb1, l1.eax(), "family/model/stepping");
        assertEquals(0x60fb1, c.get(0x8000_0001, 0).eax(), "the extended signature, as QEMU gives it");
        assertEquals(new X86Cpuid.Leaf(0, 1, 0x100, 0), c.get(0xb, 0), "leaf 0xB: one thread at the SMT level");
        assertEquals(new X86Cpuid.Leaf(0, 1, 0x201, 0), c.get(0xb, 1), "leaf 0xB: one core at the core level");
        assertEquals(0, l1.ecx() & X86Cpuid.L1_ECX_RDRAND, "no RDRAND");
        assertEquals(0, c.get(7, 0).ebx() & X86Cpuid.L7_EBX_RDSEED, "no RDSEED");
        assertEquals(0, l1.edx() & X86Cpuid.L1_EDX_TSC, "no TSC bit");
        assertEquals(0, l1.edx() & X86Cpuid.L1_EDX_APIC, "no local APIC");
        assertEquals(0, c.get(0x8000_0001, 0).edx() & X86Cpuid.EXT1_EDX_RDTSCP, "no RDTSCP");
    }

    /** The engine is asked once per JVM; each machine still gets a table of its own, which its policy changes alone. */
    @Test
    void eachProbeIsATableOfItsOwn() {
        X86Cpuid a = X86Cpuid.probe(), b = X86Cpuid.probe();
        X86Cpuid.Leaf l1 = a.get(1, 0);
        assertEquals(l1, b.get(1, 0));
        assertEquals(a.get(0x8000_0001, 0), b.get(0x8000_0001, 0));
        a.clear(1, 0, 3, X86Cpuid.L1_EDX_TSC).put(0xb, 0, new X86Cpuid.Leaf(1, 2, 3, 4));
        assertEquals(l1, b.get(1, 0), "another probe's table is unchanged");
        assertEquals(l1, X86Cpuid.probe().get(1, 0), "the kept answer is unchanged");
        assertEquals(new X86Cpuid.Leaf(1, 2, 3, 4), a.get(0xb, 0));
        assertEquals(b.get(0xb, 0), X86Cpuid.probe().get(0xb, 0));
    }

    /**
     * CPU 2 of four, as QEMU 7.2 answers for {@code -smp 4} (one socket of four cores, one thread
     * each: APIC IDs 0-3, two APIC ID bits for the core): initial APIC ID 2 and four logical
     * processors with HTT in leaf 1, x2APIC ID 2 and the core level's shift 2 and count 4 in leaf
     * 0xB (when the model has the leaf), CmpLegacy, and NC = 3 with ApicIdSize 2 in 0x80000008; the rest as CPU 0's. One CPU:
     * the table unchanged.
     */
    @Test
    void eachCpuOfFourAnswersWithItsApicIdInQemusTopology() {
        X86Cpuid base = X86Pc.cpuPolicy(X86Cpuid.probe(), false, true);
        X86Cpuid c = base.forCpu(2, 4);
        X86Cpuid.Leaf l1 = c.get(1, 0), b1 = base.get(1, 0);
        assertEquals(2, l1.ebx() >>> 24, "initial APIC ID");
        assertEquals(4, l1.ebx() >> 16 & 0xff, "logical processors per package");
        assertEquals(b1.ebx() & 0xffff, l1.ebx() & 0xffff, "CLFLUSH size, brand index kept");
        assertEquals(b1.edx() | X86Cpuid.L1_EDX_HTT, l1.edx(), "HTT");
        assertEquals(b1.eax(), l1.eax());
        assertEquals(b1.ecx(), l1.ecx());
        X86Cpuid.Leaf smt = c.get(0xb, 0), core = c.get(0xb, 1);
        if (base.get(0xb, 0).ebx() == 0) {
            // the model has no leaf 0xB (Unicorn 2.1.4's qemu64): left as it is, all zeros
            assertEquals(base.get(0xb, 0), smt, "no leaf 0xB");
            assertEquals(base.get(0xb, 1), core, "no leaf 0xB");
        } else {
            assertEquals(new X86Cpuid.Leaf(0, 1, 0x100, 2), smt, "leaf 0xB SMT level: shift 0, one thread, x2APIC ID 2");
            assertEquals(new X86Cpuid.Leaf(2, 4, 0x201, 2), core, "leaf 0xB core level: shift 2, four CPUs, x2APIC ID 2");
        }
        assertEquals(base.get(0x8000_0001, 0).ecx() | X86Cpuid.EXT1_ECX_CMP_LEGACY, c.get(0x8000_0001, 0).ecx(), "CmpLegacy");
        assertEquals(0x2003, c.get(0x8000_0008, 0).ecx(), "ApicIdSize 2, NC 3");
        X86Cpuid one = base.forCpu(0, 1);
        for (int leaf : new int[] {1, 0xb, 0x8000_0001, 0x8000_0008}) assertEquals(base.get(leaf, 0), one.get(leaf, 0), "one CPU: leaf " + leaf);
    }
}
