package dev.kpemu.machine.arm64;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.PageTableWalker;
import dev.kpemu.machine.StopReason;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Arm64Reg;

/**
 * Bare-metal guests with the MMU on: the test builds 4-level tables (TTBR0 identity for the boot
 * stub, TTBR1 mapping the kernel VA 0xffff_0000_0000_0000 onto RAM), the guest turns the MMU on
 * itself, jumps to its high alias, installs VBAR_EL1 and runs a test body there.
 */
class Arm64MmuTest {
    static final long RAM = Arm64Layout.RAM_BASE;
    static final long RAM_SIZE = 128L << 20;
    static final long KVA = 0xffff_0000_0000_0000L;          // maps RAM_BASE
    static final long KVA_OFFSET = KVA - RAM;                 // 0xfffe_ffff_c000_0000
    static final long RESULTS_PA = RAM + 0x1_0000;
    static final long STACK_PA = RAM + 0x8_0000;
    static final long TABLES_PA = RAM + 0x10_0000;
    static final long DEMAND_VA = KVA + 0x8000_0000L;         // no pages mapped, L3 tables exist
    static final long DEMAND_BACKING_PA = RAM + 0x400_0000;

    /** PSCI SYSTEM_OFF / SYSTEM_RESET as movz/movk into x0. */
    static final String POWER_OFF = "movz x0, #0x8400, lsl #16\n movk x0, #8\n hvc #0\n";
    static final String RESET = "movz x0, #0x8400, lsl #16\n movk x0, #9\n hvc #0\n";

    /** The guest: boot stub (MMU on, jump high, VBAR), {@code body}, power off; vectors; {@code handlers}. */
    static String program(String body, String syncSpx, String handlers) {
        StringBuilder vectors = new StringBuilder();
        for (int i = 0; i < 16; i++) {
            vectors.append(".align 7\n").append(i == 4 && syncSpx != null ? "b " + syncSpx : "b unexpected").append('\n');
        }
        return """
                msr mair_el1, x1
                msr tcr_el1, x2
                msr ttbr0_el1, x3
                msr ttbr1_el1, x4
                isb
                msr sctlr_el1, x5
                isb
                adr x7, high
                add x7, x7, x6
                br x7
            high:
                add sp, sp, x6
                adr x8, vectors
                msr vbar_el1, x8
                isb
            """ + body + POWER_OFF + "b .\n" + "unexpected:\n" + RESET + "b .\n" + handlers + ".align 11\nvectors:\n" + vectors;
    }

    record Guest(Arm64Machine m, long root0, long root1, long l3Demand) {}

    static Guest boot(String source) {
        Arm64Machine m = Arm64Machine.create(RAM_SIZE);
        GuestPageTables pt = new GuestPageTables(m.memory(), TABLES_PA, 1 << 20);
        long root0 = pt.allocTable(), root1 = pt.allocTable();
        for (long off = 0; off < 0x20_0000; off += 4096) {
            pt.mapPage(root0, RAM + off, RAM + off, GuestPageTables.KERNEL_RW);
            pt.mapPage(root1, KVA + off, RAM + off, GuestPageTables.KERNEL_RW);
        }
        for (long off = 0x20_0000; off < RAM_SIZE; off += 0x20_0000) {
            pt.mapBlock2M(root1, KVA + off, RAM + off, GuestPageTables.KERNEL_RW | GuestPageTables.PXN);
        }
        long l3a = pt.level3Table(root1, DEMAND_VA), l3b = pt.level3Table(root1, DEMAND_VA + 0x20_0000);
        assertEquals(l3a + 4096, l3b, "demand L3 tables are contiguous");
        byte[] code = Asm.arm64(source, 0);
        m.memory().write(RAM, code);
        m.setReg(Arm64Reg.X1, GuestPageTables.MAIR);
        m.setReg(Arm64Reg.X2, GuestPageTables.TCR);
        m.setReg(Arm64Reg.X3, root0);
        m.setReg(Arm64Reg.X4, root1);
        m.setReg(Arm64Reg.X5, GuestPageTables.SCTLR_MMU_ON);
        m.setReg(Arm64Reg.X6, KVA_OFFSET);
        m.setReg(Arm64Reg.SP, STACK_PA);
        m.setReg(Arm64Reg.X20, l3a + KVA_OFFSET);
        m.setReg(Arm64Reg.X21, DEMAND_VA);
        m.setReg(Arm64Reg.X22, DEMAND_BACKING_PA);
        m.setReg(Arm64Reg.X24, RESULTS_PA + KVA_OFFSET);
        m.setPc(RAM);
        return new Guest(m, root0, root1, l3a);
    }

    @Test
    void bareMetalProgramRunsWithMmuOnAtKernelAddresses() {
        String body = """
                mov x10, #0
                mov x11, #1
            sum:
                add x10, x10, x11
                add x11, x11, #1
                cmp x11, #101
                b.ne sum
                str x10, [x24]
                mov x12, #0
                mov x13, #1
                mov x14, #20
            fib:
                add x15, x12, x13
                mov x12, x13
                mov x13, x15
                subs x14, x14, #1
                b.ne fib
                str x12, [x24, #8]
                mrs x16, CurrentEL
                str x16, [x24, #16]
                stp x10, x12, [sp, #-16]!
                ldp x17, x18, [sp], #16
                mov x19, sp
                adr x25, high
                str x25, [x24, #24]
            """;
        Guest g = boot(program(body, null, ""));
        try (Arm64Machine m = g.m()) {
            assertEquals(new StopReason.PoweredOff(0), m.run(1_000_000));
            assertEquals(5050, m.memory().readLong(RESULTS_PA));
            assertEquals(6765, m.memory().readLong(RESULTS_PA + 8));
            assertEquals(0b0100, m.memory().readLong(RESULTS_PA + 16), "CurrentEL = EL1");
            long high = m.memory().readLong(RESULTS_PA + 24);
            assertEquals(KVA + 0x28, high, "adr ran at the kernel alias (11th instruction)");
            assertEquals(5050, m.reg(Arm64Reg.X17));
            assertEquals(6765, m.reg(Arm64Reg.X18));
            assertEquals(STACK_PA + KVA_OFFSET, m.reg(Arm64Reg.X19));
            assertTrue(Long.compareUnsigned(m.pc(), KVA) > 0, "stopped at a kernel VA");
            // One batch reads the translation registers as the single reads do (the walker's source).
            var u = m.engine();
            long[] batch = new long[4];
            u.registerBatch(new int[][] {{3, 0, 1, 0, 0}, {3, 0, 2, 0, 2}}, Arm64Reg.TTBR0_EL1, Arm64Reg.TTBR1_EL1).read(batch);
            assertArrayEquals(new long[] {u.sysRegRead(3, 0, 1, 0, 0), u.sysRegRead(3, 0, 2, 0, 2), u.regRead(Arm64Reg.TTBR0_EL1),
                u.regRead(Arm64Reg.TTBR1_EL1)}, batch, "SCTLR_EL1, TCR_EL1, TTBR0_EL1, TTBR1_EL1");
            assertTrue((batch[0] & 1) != 0 && batch[3] != 0, "MMU on, a kernel table");
            // The host walker agrees with the MMU.
            PageTableWalker w = m.pageTables();
            PageTableWalker.Translation t = w.translate(KVA + 0x1_0008);
            assertEquals(RESULTS_PA + 8, t.physical());
            assertEquals(4096, t.pageSize());
            assertTrue(t.writable());
            assertFalse(t.user());
            assertTrue(t.executable());
            PageTableWalker.Translation b = w.translate(KVA + 0x123_4567);
            assertEquals(RAM + 0x123_4567, b.physical());
            assertEquals(0x20_0000, b.pageSize());
            assertFalse(b.executable(), "PXN block");
            assertEquals(RAM + 0x40, w.translate(RAM + 0x40).physical(), "TTBR0 identity");
            assertNull(w.translate(DEMAND_VA));
            assertNull(w.translate(0xffff_8000_0000_0000L));
            assertNull(w.translate(0x0001_0000_0000_0000L), "outside both ranges");
            assertEquals(6765, m.readVirtualLong(KVA + 0x1_0008));
        }
    }

    @Test
    void guestDataAbortHandlerDemandPagesAThousandPages() {
        String body = """
                mov x23, #0
                mov x1, x21
                mov x3, #0
                mov x2, #1000
            touch:
                str x3, [x1]
                add x1, x1, #1, lsl #12
                add x3, x3, #1
                cmp x3, x2
                b.ne touch
                str x23, [x24, #16]
                mov x1, x21
                mov x3, #0
                mov x4, #0
            readback:
                ldr x5, [x1]
                add x4, x4, x5
                add x1, x1, #1, lsl #12
                add x3, x3, #1
                cmp x3, x2
                b.ne readback
                str x4, [x24, #24]
            """;
        String handler = """
            demand:
                mrs x9, esr_el1
                lsr x10, x9, #26
                cmp x10, #0x25
                b.ne unexpected
                mrs x11, far_el1
                cbnz x23, notfirst
                str x9, [x24]
                str x11, [x24, #8]
            notfirst:
                add x23, x23, #1
                sub x12, x11, x21
                lsr x12, x12, #12
                lsl x13, x12, #12
                add x13, x13, x22
                mov x14, #0x703
                orr x13, x13, x14
                str x13, [x20, x12, lsl #3]
                dsb ishst
                lsr x14, x11, #12
                tlbi vaae1, x14
                dsb ish
                isb
                eret
            """;
        Guest g = boot(program(body, "demand", handler));
        try (Arm64Machine m = g.m()) {
            assertEquals(new StopReason.PoweredOff(0), m.run(10_000_000));
            assertEquals(0x9600_0047L, m.memory().readLong(RESULTS_PA), "ESR: EC 0x25, IL, WnR, DFSC translation fault level 3");
            assertEquals(DEMAND_VA, m.memory().readLong(RESULTS_PA + 8), "FAR");
            assertEquals(1000, m.memory().readLong(RESULTS_PA + 16), "faults counted by the guest");
            assertEquals(999L * 1000 / 2, m.memory().readLong(RESULTS_PA + 24), "read back through the new mappings");
            assertEquals(1000, m.exceptionsTaken());
            if (NativeSvc.available()) {
                // the first abort goes to the Java path, which verifies the current-EL vector; the native hook takes the rest
                assertEquals(999, m.nativeAbortsTaken(), "aborts taken natively");
            }
            for (int i : new int[] {0, 1, 511, 512, 999}) {
                assertEquals(i, m.memory().readLong(DEMAND_BACKING_PA + 4096L * i));
                assertEquals(DEMAND_BACKING_PA + 4096L * i, m.pageTables().translate(DEMAND_VA + 4096L * i).physical());
            }
            assertNull(m.pageTables().translate(DEMAND_VA + 4096L * 1000));
        }
    }

    @Test
    void deliveredSyndromesMatchTheArchitecture() {
        String body = """
                mov x23, #0
                .long 0x00000000
                brk #0x77
                ldr x5, [x21]
                str x5, [x21, #8]
                movz x26, #0xffff, lsl #48
                movk x26, #0x8000, lsl #32
                ldr x5, [x26]
                blr x21
                svc #0x99
            """;
        String handler = """
            record:
                mrs x9, esr_el1
                mrs x10, far_el1
                mrs x11, elr_el1
                add x12, x24, x23, lsl #5
                stp x9, x10, [x12, #32]
                str x11, [x12, #48]
                add x23, x23, #1
                lsr x13, x9, #26
                cmp x13, #0x21
                b.eq fromcall
                cmp x13, #0x15
                b.eq back
                add x11, x11, #4
                msr elr_el1, x11
                b back
            fromcall:
                msr elr_el1, x30
            back:
                eret
            """;
        Guest g = boot(program(body, "record", handler));
        try (Arm64Machine m = g.m()) {
            assertEquals(new StopReason.PoweredOff(0), m.run(1_000_000));
            long bodyStart = KVA + 0x38;   // 14 boot-stub instructions, then mov x23
            long[][] expected = {
                    // ESR, FAR (0 = not checked), ELR
                    {0x0200_0000L, 0, bodyStart + 4},                       // UDF: EC 0, IL
                    {0xf200_0077L, 0, bodyStart + 8},                       // BRK #0x77: EC 0x3c
                    {0x9600_0007L, DEMAND_VA, bodyStart + 12},              // read, translation fault L3
                    {0x9600_0047L, DEMAND_VA + 8, bodyStart + 16},          // write (WnR)
                    {0x9600_0004L, 0xffff_8000_0000_0000L, bodyStart + 28}, // translation fault L0
                    {0x8600_0007L, DEMAND_VA, DEMAND_VA},                   // instruction abort, same EL
                    {0x5600_0099L, 0, bodyStart + 40},                      // SVC: ELR after it
            };
            assertEquals(expected.length, m.reg(Arm64Reg.X23));
            for (int i = 0; i < expected.length; i++) {
                long rec = RESULTS_PA + 32 + 32L * i;
                assertEquals(expected[i][0], m.memory().readLong(rec), "ESR #" + i);
                if (expected[i][1] != 0) assertEquals(expected[i][1], m.memory().readLong(rec + 8), "FAR #" + i);
                assertEquals(expected[i][2], m.memory().readLong(rec + 16), "ELR #" + i);
            }
            assertNotNull(m.pageTables().translate(KVA));
        }
    }
}
