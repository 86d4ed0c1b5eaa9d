package dev.kpemu.machine.board;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.Machine;
import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.arm64.Arm64Layout;
import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.machine.arm64.Psci;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;

/**
 * The arm64 board with several PEs ({@link Arm64Board#create(long, dev.kpemu.machine.arm64.devices.Pl011.Sink,
 * dev.kpemu.machine.arm64.devices.Pl011.Sink, int)}), bare metal, MMU off: PE 0 starts the others
 * through PSCI CPU_ON over HVC, as Linux's {@code cpu_psci_cpu_boot} does; each reads its own
 * MPIDR_EL1 and the state CPU_ON left it in; an SGI sent through GICD_SGIR to one CPU ends that
 * vCPU's WFI and no other's; a CPU_OFF and a second CPU_ON restart a PE from its reset state.
 * Expected values are written by hand from the programs and the PSCI and GICv2 specifications.
 */
class Arm64SmpBoardTest {
    static final long RAM = Arm64Layout.RAM_BASE, SECONDARY = RAM + 0x1000, DATA = RAM + 0x1_0000;
    /** Per PE k, at DATA + 0x40 k: x0 at entry, MPIDR_EL1, SCTLR_EL1, CurrentEL, ready, GICC_IAR after the wake, woke. */
    static final int CTX = 0, MPIDR = 8, SCTLR = 16, CURRENT_EL = 24, READY = 32, IAR = 40, WOKE = 48;
    /** PE 0's PSCI answers, at DATA + 0x200: CPU_ON 1, 2, 3, AFFINITY_INFO(3) after its CPU_OFF, the second CPU_ON 3. */
    static final long ANSWERS = DATA + 0x200;
    static final int CPUS = 4;

    static String imm(String reg, long v) {
        return "movz " + reg + ", #" + (v & 0xffff) + "\n movk " + reg + ", #" + ((v >>> 16) & 0xffff) + ", lsl #16\n";
    }

    static String psci(int fn, long x1, long x2, long x3) {
        return imm("x0", fn & 0xffff_ffffL) + imm("x1", x1) + imm("x2", x2) + imm("x3", x3) + "hvc #0\n";
    }

    /** PE 0: distributor on, CPU_ON 1-3 (context 0x101-0x103), waits for them, waits for PE 3's CPU_OFF, restarts it, then SGI 1 to CPU 2 only. */
    static String primary() {
        StringBuilder s = new StringBuilder();
        s.append(imm("x20", ANSWERS)).append(imm("x21", DATA));
        s.append(imm("x9", Arm64Layout.GIC_DIST_BASE)).append("mov w10, #1\n str w10, [x9]\n");
        for (int k = 1; k < CPUS; k++) {
            s.append(psci(Psci.CPU_ON_64, Psci.mpidr(k), SECONDARY, 0x100 + k)).append("str x0, [x20, #").append(8 * (k - 1)).append("]\n");
        }
        for (int k = 1; k < CPUS; k++) {
            s.append("wait_ready").append(k).append(":\n ldr x5, [x21, #").append(0x40 * k + READY).append("]\n cbz x5, wait_ready").append(k).append("\n");
        }
        // PE 3 turns itself off after its first start: AFFINITY_INFO until it says OFF
        s.append("wait_off:\n").append(psci(Psci.AFFINITY_INFO_64, Psci.mpidr(3), 0, 0)).append("cmp x0, #1\n b.ne wait_off\n str x0, [x20, #24]\n");
        s.append(psci(Psci.CPU_ON_64, Psci.mpidr(3), SECONDARY, 0x203)).append("str x0, [x20, #32]\n");
        s.append("wait_restart:\n ldr x5, [x21, #").append(0x40 * 3 + CTX).append("]\n cmp x5, #0x203\n b.ne wait_restart\n");
        s.append("wait_ready3b:\n ldr x5, [x21, #").append(0x40 * 3 + READY).append("]\n cbz x5, wait_ready3b\n");
        // GICD_SGIR: target list filter 0, CPU 2's bit, SGI 1
        s.append(imm("x9", Arm64Layout.GIC_DIST_BASE + 0xf00)).append(imm("x10", (1L << (16 + 2)) | 1)).append("str w10, [x9]\n");
        s.append("idle0:\n wfi\n b idle0\n");
        return s.toString();
    }

    /**
     * A secondary: records x0, MPIDR_EL1, SCTLR_EL1, CurrentEL in its slot, enables its CPU
     * interface and SGI 1, says ready and waits in WFI with interrupts masked; the first start of
     * PE 3 (context 0x103) sets SCTLR_EL1.I and turns itself off instead.
     */
    static String secondary() {
        return "mrs x1, mpidr_el1\n mrs x2, sctlr_el1\n mrs x3, CurrentEL\n"
                + imm("x5", DATA) + "and x4, x1, #0xff\n add x5, x5, x4, lsl #6\n"
                + "str xzr, [x5, #" + READY + "]\n"
                + "stp x0, x1, [x5]\n stp x2, x3, [x5, #16]\n"
                + "cmp x0, #0x103\n b.eq turn_off\n"
                + imm("x6", Arm64Layout.GIC_CPU_BASE) + "mov w7, #1\n str w7, [x6]\n mov w7, #0xff\n str w7, [x6, #4]\n"
                + imm("x8", Arm64Layout.GIC_DIST_BASE + 0x100) + "mov w7, #2\n str w7, [x8]\n"
                + "mov x7, #1\n str x7, [x5, #" + READY + "]\n"
                + "wfi\n ldr w8, [x6, #0xc]\n str x8, [x5, #" + IAR + "]\n mov x7, #1\n str x7, [x5, #" + WOKE + "]\n"
                + "idle:\n wfi\n b idle\n"
                + "turn_off:\n orr x2, x2, #0x1000\n msr sctlr_el1, x2\n isb\n mov x7, #1\n str x7, [x5, #" + READY + "]\n"
                + imm("x0", Psci.CPU_OFF & 0xffff_ffffL) + "hvc #0\n"
                + "mov x7, #0xdead\n str x7, [x5, #" + WOKE + "]\n b .\n";          // never: CPU_OFF does not return
    }

    static long slot(Machine m, int pe, int field) { return m.memory().readLong(DATA + 0x40L * pe + field); }

    @Test
    void psciStartsEachPeWithItsMpidrAndAnSgiWakesOnlyItsTarget() {
        try (Arm64Board b = Arm64Board.create(16L << 20, c -> { }, null, CPUS)) {
            Arm64Machine m = b.machine();
            assertEquals(CPUS, m.cpuCount());
            assertEquals(CPUS, b.cpus());
            for (int k = 1; k < CPUS; k++) assertEquals(Machine.CpuState.STOPPED, m.cpuState(k), "PE " + k + " waits for CPU_ON");
            long resetSctlr = m.engine(1).sysRegRead(3, 0, 1, 0, 0);
            assertEquals(0, resetSctlr & 1, "MMU off at reset");
            m.memory().write(RAM, Asm.arm64(primary(), RAM));
            m.memory().write(SECONDARY, Asm.arm64(secondary(), SECONDARY));
            m.setPc(RAM);

            StopReason stop = m.run(50_000_000);

            assertInstanceOf(StopReason.Halted.class, stop, "every vCPU ends in WFI with nothing left to wake it: " + stop);
            for (int i = 0; i < 3; i++) assertEquals(Psci.SUCCESS, m.memory().readLong(ANSWERS + 8L * i), "CPU_ON " + (i + 1));
            assertEquals(Psci.AFFINITY_OFF, m.memory().readLong(ANSWERS + 24), "AFFINITY_INFO after CPU_OFF");
            assertEquals(Psci.SUCCESS, m.memory().readLong(ANSWERS + 32), "the second CPU_ON of PE 3");
            for (int k = 1; k < CPUS; k++) {
                assertEquals(k == 3 ? 0x203 : 0x100 + k, slot(m, k, CTX), "x0 = the context id, PE " + k);
                assertEquals(0x8000_0000L | k, slot(m, k, MPIDR), "MPIDR_EL1 of PE " + k);
                assertEquals(resetSctlr, slot(m, k, SCTLR), "SCTLR_EL1 at entry is the reset value (MMU off), PE " + k);
                assertEquals(1 << 2, slot(m, k, CURRENT_EL), "EL1, PE " + k);
                assertEquals(1, slot(m, k, READY), "PE " + k + " ran");
                assertSame(Psci.PowerState.ON, b.psci().state(k));
            }
            assertEquals(1, slot(m, 2, WOKE), "SGI 1 to CPU 2 ended its WFI");
            assertEquals(1, slot(m, 2, IAR), "CPU 2 acknowledges SGI 1 from CPU 0 (CPUID 0 in bits 12:10)");
            assertEquals(0, slot(m, 1, WOKE), "CPU 1 still waits");
            assertEquals(0, slot(m, 3, WOKE), "CPU 3 still waits (and its CPU_OFF did not return)");
            for (int k = 0; k < CPUS; k++) assertEquals(Machine.CpuState.HALTED, m.cpuState(k), "vCPU " + k);
            assertEquals(0x8000_0000L, m.engine(0).sysRegRead(3, 0, 0, 0, 5), "PE 0's MPIDR_EL1 as the host reads it");
        }
    }

    @Test
    void theBoardTakesOneToEightCpus() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Arm64Board.create(16L << 20, c -> { }, null, 9));
        assertEquals("an arm64 board has 1 to 8 CPUs (the GICv2's limit), not 9", e.getMessage());
        try (Arm64Board b = Arm64Board.create(16L << 20, c -> { }, null, 1)) {
            assertEquals(1, b.machine().cpuCount());
            assertNotEquals(null, b.machine().interruptController(0));
        }
    }
}
