package dev.kpemu.boot;

import java.util.ArrayList;
import java.util.List;

import dev.kpemu.machine.arm64.Arm64DebugRegisters;
import dev.kpemu.machine.arm64.Arm64Machine;

/**
 * Where the kernel writes a watchpoint register, so the host sees the guest's
 * DBGWVRn/DBGWCRn change ({@link Arm64DebugRegisters}). Unicorn 2.1.4 calls one MSR hook per
 * engine, and the generic timer's is it; but QEMU's translator, which Unicorn's inherits, ends the
 * translated block after a system-register write, so the next instruction starts a block and a
 * host breakpoint there (guest text untouched) runs after every such write, as on x86
 * ({@link X86DebugRegisterWrites}). The sites are the {@code msr} encodings of op0 2, op1 0, CRn 0
 * with op2 6 or 7 (DBGWVRn_EL1, DBGWCRn_EL1), any source register, among the words of the
 * kernel's text ({@code _stext} to {@code _etext}) as loaded in RAM: Linux's {@code write_wb_reg}
 * (a jump table of {@code msr}s). MDSCR_EL1 is not followed this way (the instruction after
 * {@code ret_to_user}'s {@code msr mdscr_el1} is a branch target reached on every return to user
 * mode): it is read when a slot is hit. Module text is not scanned.
 */
final class Arm64DebugRegisterWrites {
    private Arm64DebugRegisterWrites() {}

    /** {@code msr}, op0 2 (bit 19 clear), op1 0, CRn 0: {@code 0xd5100000 | CRm << 8 | op2 << 5 | Rt}. */
    private static final int MSR_OP0_2 = 0xd510_0000, MASK_WITHOUT_CRM_OP2_RT = 0xffff_f000;

    /** Whether {@code insn} writes DBGWVRn_EL1 or DBGWCRn_EL1 (n < 16). */
    static boolean writesWatchRegister(int insn) {
        if ((insn & MASK_WITHOUT_CRM_OP2_RT) != MSR_OP0_2) return false;
        int op2 = (insn >>> 5) & 7;
        return op2 == Arm64DebugRegisters.OP2_WVR || op2 == Arm64DebugRegisters.OP2_WCR;
    }

    /** The addresses just after each such {@code msr} of the text at {@code textVa}, loaded at {@code textPa}. */
    static List<Long> sitesAfter(Arm64Machine m, long textVa, long textPa, long length) {
        List<Long> sites = new ArrayList<>();
        byte[] chunk = new byte[1 << 16];
        for (long off = 0; off < length; off += chunk.length) {
            int n = (int) Math.min(chunk.length, length - off) & ~3;
            m.memory().read(textPa + off, chunk, 0, n);
            for (int i = 0; i < n; i += 4) {
                int insn = (chunk[i] & 0xff) | (chunk[i + 1] & 0xff) << 8 | (chunk[i + 2] & 0xff) << 16 | (chunk[i + 3] & 0xff) << 24;
                if (writesWatchRegister(insn)) sites.add(textVa + off + i + 4);
            }
        }
        return sites;
    }

    /** Sets the host breakpoints that resynchronise {@code m}'s guest watchpoints at {@code sites} ({@link #sitesAfter}'s, perhaps kept from an earlier run); returns their number. */
    static int watch(Arm64Machine m, List<Long> sites) {
        int n = 0;
        for (long at : sites) {
            if (m.hasBreakpoint(at)) continue;
            m.addBreakpoint(at, (mm, pc) -> {
                m.debugRegisters().sync();
                return true;
            });
            n++;
        }
        return n;
    }
}
