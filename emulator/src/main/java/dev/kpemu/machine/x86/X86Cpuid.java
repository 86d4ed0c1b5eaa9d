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

    /** The model's answers as read from an engine, kept for the JVM's life (the same libunicorn answers the same). */
    private record Probed(Map<Long, Leaf> raw, int maxBasic, int maxExtended) {}

    private static Probed probed;

    /**
     * The guest-visible engine model's (qemu64's) CPUID (leaves 0..max and 0x80000000..max,
     * sub-leaves 0..7), a table of the caller's own. The engine is asked once per JVM: a machine
     * built after the first (a fault exploration's rows, a test suite's boots) copies that
     * answer instead of opening an engine and running some hundred {@code cpuid}s (~20 ms).
     */
    public static X86Cpuid probe() {
        Probed p;
        synchronized (X86Cpuid.class) {
            if (probed == null) probed = probeEngine();
            p = probed;
        }
        return new X86Cpuid(p.raw(), p.maxBasic(), p.maxExtended());
    }

    private static Probed probeEngine() {
        Map<Long, Leaf> raw = new HashMap<>();
        try (Unicorn uc = X86Machine.openCpuidModelEngine()) {
            uc.memMap(0x1000, 0x1000, Unicorn.PROT_ALL);
            uc.memWrite(0x1000, new byte[] {0x0f, (byte) 0xa2});
            int maxBasic = query(uc, 0, 0).eax();
            int maxExt = query(uc, 0x8000_0000, 0).eax();
            for (int leaf = 0; leaf <= maxBasic; leaf++) probeLeaf(uc, raw, leaf);
            for (int leaf = 0x8000_0000; Integer.compareUnsigned(leaf, maxExt) <= 0; leaf++) probeLeaf(uc, raw, leaf);
            return new Probed(Map.copyOf(raw), maxBasic, maxExt);
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

    /** Replaces the answer for {@code (leaf, sub)} (a leaf within the table's range). */
    public X86Cpuid put(int leaf, int sub, Leaf answer) {
        table.put(key(leaf, sub), answer);
        return this;
    }

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

    /** CPUID.1:EDX HTT, CPUID.0x80000001:ECX CmpLegacy. */
    public static final int L1_EDX_HTT = 1 << 28, EXT1_ECX_CMP_LEGACY = 1 << 1;

    /**
     * A copy of this table as CPU {@code apicId} of a machine with {@code cpus} CPUs answers it,
     * as QEMU 7.2's {@code cpu_x86_cpuid} does for {@code -smp cpus} (its default topology since
     * 6.2: one socket of {@code cpus} cores, one thread each, APIC IDs 0..cpus-1): CPUID.1:EBX[31:24]
     * the initial APIC ID and, with more than one CPU, EBX[23:16] the logical processors of the
     * package and EDX's HTT bit; leaf 0xB, when the model has it (Unicorn 2.1.4's qemu64 answers
     * zeros, QEMU 7.2's has it), EDX the x2APIC ID and its core level (sub-leaf 1) the package's
     * APIC ID shift and CPU count; CPUID.0x80000001:ECX CmpLegacy and CPUID.0x80000008:ECX
     * the cores of the package (NC = cpus - 1) and their APIC ID bits (AMD's leaves: qemu64 is an
     * AMD model). With one CPU the table is this one's (APIC ID 0 is what it says already).
     */
    public X86Cpuid forCpu(int apicId, int cpus) {
        if (cpus < 1 || apicId < 0 || apicId >= cpus || cpus > 0xff) throw new IllegalArgumentException("CPU " + apicId + " of " + cpus);
        X86Cpuid c = new X86Cpuid(table, maxBasic, maxExtended);
        if (cpus == 1) return c;
        int pkgShift = 32 - Integer.numberOfLeadingZeros(cpus - 1);   // ceil(log2(cpus)): QEMU's apicid_pkg_offset, one thread per core
        Leaf l1 = c.table.get(key(1, 0));
        if (l1 != null) c.table.put(key(1, 0), new Leaf(l1.eax(), (l1.ebx() & 0x0000_ffff) | (apicId << 24) | (cpus << 16), l1.ecx(), l1.edx() | L1_EDX_HTT));
        Leaf smt = c.table.get(key(0xb, 0));
        boolean leafB = smt != null && smt.ebx() != 0;   // Unicorn 2.1.4's qemu64 answers leaf 0xB with zeros: no such leaf
        for (int sub = 0; leafB && sub < 8; sub++) {
            Leaf b = c.table.get(key(0xb, sub));
            if (b == null) continue;
            if (sub == 1 && (b.ecx() >> 8 & 0xff) == 2) c.table.put(key(0xb, sub), new Leaf(pkgShift, cpus, b.ecx(), apicId));
            else c.table.put(key(0xb, sub), new Leaf(b.eax(), b.ebx(), b.ecx(), apicId));
        }
        Leaf e1 = c.table.get(key(0x8000_0001, 0));
        if (e1 != null) c.table.put(key(0x8000_0001, 0), new Leaf(e1.eax(), e1.ebx(), e1.ecx() | EXT1_ECX_CMP_LEGACY, e1.edx()));
        Leaf e8 = c.table.get(key(0x8000_0008, 0));
        if (e8 != null) c.table.put(key(0x8000_0008, 0), new Leaf(e8.eax(), e8.ebx(), (pkgShift << 12) | (cpus - 1), e8.edx()));
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
