package dev.kpemu.machine.x86;

import java.util.HashMap;
import java.util.Map;

import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * The CPUID the guest sees: Unicorn's own qemu64 answers, read once on a throwaway engine, with
 * the machine's policy applied on top (features this machine does not have are cleared). The
 * {@code cpuid} instruction hook answers from this table and skips the engine's CPUID.
 */
public final class X86Cpuid {
    /** A CPUID result. */
    public record Leaf(int eax, int ebx, int ecx, int edx) {}

    // CPUID.1 EDX / ECX feature bits
    public static final int L1_EDX_TSC = 1 << 4, L1_EDX_APIC = 1 << 9, L1_EDX_MCE = 1 << 7, L1_EDX_MCA = 1 << 14;
    public static final int L1_ECX_RDRAND = 1 << 30, L1_ECX_CX16 = 1 << 13;
    public static final int L1_ECX_X2APIC = 1 << 21, L1_ECX_TSC_DEADLINE = 1 << 24, L1_ECX_HYPERVISOR = 1 << 31;
    public static final int EXT1_EDX_RDTSCP = 1 << 27;
    public static final int L7_EBX_TSC_ADJUST = 1 << 1, L7_EBX_RDSEED = 1 << 18;
    /** Leaves with sub-leaves (ECX matters). */
    private static final int[] INDEXED = {4, 7, 0xb, 0xd, 0x8000001d};

    private final Map<Long, Leaf> table = new HashMap<>();
    private final int maxBasic, maxExtended;

    private X86Cpuid(Map<Long, Leaf> raw, int maxBasic, int maxExtended) {
        table.putAll(raw);
        this.maxBasic = maxBasic;
        this.maxExtended = maxExtended;
    }

    /** Reads the engine model's CPUID (leaves 0..max and 0x80000000..max, sub-leaves 0..7). */
    public static X86Cpuid probe() {
        Map<Long, Leaf> raw = new HashMap<>();
        try (Unicorn uc = X86Machine.openEngine()) {
            uc.memMap(0x1000, 0x1000, Unicorn.PROT_ALL);
            uc.memWrite(0x1000, new byte[] {0x0f, (byte) 0xa2});
            int maxBasic = query(uc, 0, 0).eax();
            int maxExt = query(uc, 0x8000_0000, 0).eax();
            for (int leaf = 0; leaf <= maxBasic; leaf++) probeLeaf(uc, raw, leaf);
            for (int leaf = 0x8000_0000; Integer.compareUnsigned(leaf, maxExt) <= 0; leaf++) probeLeaf(uc, raw, leaf);
            return new X86Cpuid(raw, maxBasic, maxExt);
        }
    }

    private static void probeLeaf(Unicorn uc, Map<Long, Leaf> raw, int leaf) {
        if (indexed(leaf)) {
            for (int sub = 0; sub < 8; sub++) raw.put(key(leaf, sub), query(uc, leaf, sub));
        } else {
            raw.put(key(leaf, 0), query(uc, leaf, 0));
        }
    }

    private static Leaf query(Unicorn uc, int leaf, int sub) {
        uc.regWrite(X86Reg.RAX, Integer.toUnsignedLong(leaf));
        uc.regWrite(X86Reg.RCX, Integer.toUnsignedLong(sub));
        uc.start(0x1000, 0x1002, 0, 1);
        return new Leaf((int) uc.regRead(X86Reg.RAX), (int) uc.regRead(X86Reg.RBX), (int) uc.regRead(X86Reg.RCX), (int) uc.regRead(X86Reg.RDX));
    }

    private static boolean indexed(int leaf) {
        for (int l : INDEXED) if (l == leaf) return true;
        return false;
    }

    private static long key(int leaf, int sub) { return (Integer.toUnsignedLong(leaf) << 32) | (indexed(leaf) ? Integer.toUnsignedLong(sub) : 0); }

    /** Clears feature bits in one register of a leaf (reg: 0 EAX, 1 EBX, 2 ECX, 3 EDX). */
    public X86Cpuid clear(int leaf, int sub, int reg, int bits) {
        Leaf l = table.get(key(leaf, sub));
        if (l == null) return this;
        table.put(key(leaf, sub), switch (reg) {
            case 0 -> new Leaf(l.eax() & ~bits, l.ebx(), l.ecx(), l.edx());
            case 1 -> new Leaf(l.eax(), l.ebx() & ~bits, l.ecx(), l.edx());
            case 2 -> new Leaf(l.eax(), l.ebx(), l.ecx() & ~bits, l.edx());
            default -> new Leaf(l.eax(), l.ebx(), l.ecx(), l.edx() & ~bits);
        });
        return this;
    }

    /** Sets feature bits in one register of a leaf (reg: 0 EAX, 1 EBX, 2 ECX, 3 EDX). */
    public X86Cpuid set(int leaf, int sub, int reg, int bits) {
        Leaf l = table.getOrDefault(key(leaf, sub), new Leaf(0, 0, 0, 0));
        table.put(key(leaf, sub), switch (reg) {
            case 0 -> new Leaf(l.eax() | bits, l.ebx(), l.ecx(), l.edx());
            case 1 -> new Leaf(l.eax(), l.ebx() | bits, l.ecx(), l.edx());
            case 2 -> new Leaf(l.eax(), l.ebx(), l.ecx() | bits, l.edx());
            default -> new Leaf(l.eax(), l.ebx(), l.ecx(), l.edx() | bits);
        });
        return this;
    }

    /** The answer for {@code (leaf, sub)}; out-of-range leaves answer as the highest basic leaf, as Intel CPUs do. */
    public Leaf get(int leaf, int sub) {
        boolean ext = (leaf & 0x8000_0000) != 0;
        if (ext ? Integer.compareUnsigned(leaf, maxExtended) > 0 : Integer.compareUnsigned(leaf, maxBasic) > 0) {
            Leaf l = ext ? null : table.get(key(maxBasic, sub));
            return l == null ? new Leaf(0, 0, 0, 0) : l;
        }
        Leaf l = table.get(key(leaf, sub));
        return l == null ? new Leaf(0, 0, 0, 0) : l;
    }

    /**
     * A copy of this table as the CPU with APIC ID {@code apicId} answers it: CPUID.1:EBX[31:24]
     * (the initial APIC ID) and, in every sub-leaf of leaf 0xB, EDX (the x2APIC ID), as QEMU's
     * {@code cpu_x86_cpuid} fills them from the CPU's {@code apic_id}; the rest is shared by all
     * CPUs (QEMU's {@code -smp N}: one core per socket, so no other leaf names the CPU).
     */
    public X86Cpuid forApicId(int apicId) {
        X86Cpuid c = new X86Cpuid(table, maxBasic, maxExtended);
        Leaf l1 = c.table.get(key(1, 0));
        if (l1 != null) c.table.put(key(1, 0), new Leaf(l1.eax(), (l1.ebx() & 0x00ff_ffff) | (apicId << 24), l1.ecx(), l1.edx()));
        for (int sub = 0; sub < 8; sub++) {
            Leaf b = c.table.get(key(0xb, sub));
            if (b != null) c.table.put(key(0xb, sub), new Leaf(b.eax(), b.ebx(), b.ecx(), apicId));
        }
        return c;
    }

    /** Installs the hook that answers the guest's {@code cpuid} from this table. */
    public Unicorn.Hook install(Unicorn uc) {
        return uc.hookCpuid(u -> {
            Leaf l = get((int) u.regRead(X86Reg.RAX), (int) u.regRead(X86Reg.RCX));
            u.regWrite(X86Reg.RAX, Integer.toUnsignedLong(l.eax()));
            u.regWrite(X86Reg.RBX, Integer.toUnsignedLong(l.ebx()));
            u.regWrite(X86Reg.RCX, Integer.toUnsignedLong(l.ecx()));
            u.regWrite(X86Reg.RDX, Integer.toUnsignedLong(l.edx()));
            return true;
        });
    }
}
