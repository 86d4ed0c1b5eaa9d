package dev.kpemu.machine;

import static dev.kpemu.machine.SmpGuest.FUNC;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.Unicorn;

/**
 * Two mechanisms the host could use to learn that one vCPU wrote code another vCPU has translated
 * (issue 26; docs/smp-notes.md): a page of the shared RAM write-protected in the writing engine
 * only, and (arm64) the guest's own instruction-cache maintenance, which Linux issues after every
 * text change.
 */
class CodeWriteDetectionTest {

    /**
     * {@code uc_mem_protect} is per engine: A's page of {@code FUNC} without write permission makes
     * A's guest store there call A's write-protection hook (with address, size and value), while B
     * maps the same host page writable. Returning true from the hook goes on with the next
     * instruction but does NOT store: the hook must make the store itself (here in the shared host
     * memory, in place). The page stays protected in A, so every later store of A there reports
     * again; the host then drops B's translations of the range, and B runs the new code.
     */
    @ParameterizedTest
    @EnumSource(SmpGuest.class)
    void writeProtectionInOneEngineReportsItsStoresToCode(SmpGuest g) {
        try (HostRam ram = HostRam.allocate(SmpGuest.RAM_SIZE)) {
            g.load(ram.segment());
            try (Unicorn a = g.engine(ram); Unicorn b = g.engine(ram)) {
                assertEquals(1, g.callFunction(b));
                a.memProtect(FUNC & ~0xfffL, 0x1000, Unicorn.PROT_READ | Unicorn.PROT_EXEC);
                List<long[]> reported = new ArrayList<>();
                boolean[] hostStores = {false};
                a.hookMemoryEvent(Unicorn.HOOK_MEM_WRITE_PROT, 1, 0, (u, type, address, size, value) -> {
                    reported.add(new long[] {address, size, value});
                    if (hostStores[0]) {
                        for (int i = 0; i < size; i++) {
                            ram.segment().set(java.lang.foreign.ValueLayout.JAVA_BYTE, address - SmpGuest.RAM + i, (byte) (value >>> (8 * i)));
                        }
                    }
                    return true;
                });
                g.guestStore(a, FUNC, g.functionWord(2));
                assertEquals(1, reported.size());
                assertEquals(g.functionWord(1), b.memReadLong(FUNC), "the hook returned true: the run went on, nothing stored");
                reported.clear();
                hostStores[0] = true;
                g.guestStore(a, FUNC, g.functionWord(2));
                assertEquals(1, reported.size());
                assertEquals(FUNC, reported.get(0)[0]);
                assertEquals(8, reported.get(0)[1]);
                assertEquals(g.functionWord(2), reported.get(0)[2]);
                assertEquals(g.functionWord(2), b.memReadLong(FUNC), "the hook stored");
                assertEquals(2, g.callFunction(a), "A runs what it stored");
                g.guestStore(a, FUNC, g.functionWord(3));
                assertEquals(2, reported.size(), "still protected: the next store reports too");
                b.removeTranslationCache(reported.get(1)[0], reported.get(1)[0] + reported.get(1)[1]);
                assertEquals(3, g.callFunction(b));
                g.guestStore(b, SmpGuest.DATA, 1);
                assertEquals(2, reported.size(), "B's stores are B's: nothing reported on A");
            }
        }
    }

    /**
     * arm64: Linux makes new code visible with DC CVAU + IC IVAU (by virtual address) and IC
     * IALLUIS (the A57 model's CTR_EL0 has DIC clear, so Linux cannot skip the IC); these are SYS
     * instructions, and a UC_HOOK_INSN on ARM64_INS_SYS sees each with the operand register.
     */
    @Test
    void arm64CacheMaintenanceReachesTheSysHook() {
        SmpGuest g = SmpGuest.ARM64;
        try (HostRam ram = HostRam.allocate(SmpGuest.RAM_SIZE)) {
            g.load(ram.segment());
            byte[] code = g.asm("dc cvau, x9\n ic ivau, x9\n ic ialluis\n ic iallu\n dsb ish\n isb\n nop", SmpGuest.SCRATCH);
            SmpGuest.put(ram.segment(), SmpGuest.SCRATCH, code);
            try (Unicorn a = g.engine(ram)) {
                List<String> seen = new ArrayList<>();
                a.hookSysReg(Unicorn.ARM64_INS_SYS, (u, reg, acc) -> {
                    seen.add(String.format("op1=%d CRn=%d CRm=%d op2=%d x=%s", acc.op1(), acc.crn(), acc.crm(), acc.op2(),
                            reg == Arm64Reg.X9 ? Long.toHexString(u.regRead(reg)) : "-"));
                    return false;
                });
                long ctr = a.sysRegRead(3, 3, 0, 0, 1);
                assertEquals(0, ctr & (1L << 29), "CTR_EL0.DIC clear: Linux must and does issue IC IVAU for new code (CTR_EL0 0x" + Long.toHexString(ctr) + ")");
                a.regWrite(Arm64Reg.X9, FUNC + 0x40);
                a.start(SmpGuest.SCRATCH, SmpGuest.SCRATCH + code.length - 4, 0, 0);
                assertEquals(SEEN, seen);
                assertEquals(SmpGuest.SCRATCH + code.length - 4, a.regRead(Arm64Reg.PC), "the hook returning false: each instruction then runs as usual");
            }
        }
    }

    /** DC CVAU, IC IVAU (with the address), IC IALLUIS, IC IALLU; DSB and ISB are not SYS instructions. */
    static final List<String> SEEN = List.of("op1=3 CRn=7 CRm=11 op2=1 x=11040", "op1=3 CRn=7 CRm=5 op2=1 x=11040",
            "op1=0 CRn=7 CRm=1 op2=0 x=-", "op1=0 CRn=7 CRm=5 op2=0 x=-");
}
