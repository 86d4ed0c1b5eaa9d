package dev.kpemu.unicorn;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.kpemu.testing.Asm;

class UnicornBindingTest {
    static final long BASE = 0x10000;

    @Test
    void versionIsAtLeast214() {
        assertTrue(Unicorn.version().matches("2\\.1\\.([4-9]|[1-9][0-9])"), Unicorn.version());
    }

    @Test
    void x86RunsCodeAndReadsRegisters() {
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64)) {
            byte[] code = Asm.x86("mov $41, %rax\n inc %rax\n mov %rax, 0x100(%rip)\n", BASE);
            uc.memMap(BASE, 0x1000, Unicorn.PROT_ALL);
            uc.memWrite(BASE, code);
            uc.start(BASE, BASE + code.length, 0, 0);
            assertEquals(42, uc.regRead(X86Reg.RAX));
            assertEquals(BASE + code.length, uc.regRead(X86Reg.RIP));
            assertEquals(42, uc.memReadLong(BASE + code.length + 0x100));
        }
    }

    /**
     * A context narrowed to a prefix of x86's CPU state saves and restores that prefix only: RAX (in
     * it) comes back, FS_BASE (the fifth segment cache, past the CS and SS caches the prefix ends
     * with in kpemu's use) keeps the value written after the save; a whole context restores both.
     */
    @Test
    void x86PrefixContextRestoresOnlyItsPrefix() {
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64)) {
            long end = dev.kpemu.machine.x86.X86ContextLayout.get().privilegeEnd();
            assertTrue(end - 40 < (uc.contextSize() - 40) / 8, "a few hundred bytes instead of the whole state");
            prefixRestoresOnlyItself(uc, end, new int[] {X86Reg.RAX}, X86Reg.FS_BASE);
        }
    }

    /** On arm64 too: a context through the PC restores X0 and the PC, not a register after them (ELR_EL1). */
    @Test
    void arm64PrefixContextRestoresOnlyItsPrefix() {
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_ARM64, Unicorn.MODE_ARM)) {
            prefixRestoresOnlyItself(uc, 512, new int[] {Arm64Reg.X0, Arm64Reg.PC}, Arm64Reg.ELR_EL1);
        }
    }

    /** Registers {@code inside} come back from a prefix context ending at {@code end}; {@code outside} only from a whole one. */
    private static void prefixRestoresOnlyItself(Unicorn uc, long end, int[] inside, int outside) {
        try (Unicorn.Context prefix = uc.contextAllocPrefix(end); Unicorn.Context all = uc.contextAlloc()) {
            assertEquals(end - 40, uc.contextCopied(prefix));
            assertEquals(uc.contextSize() - 40, uc.contextCopied(all));
            for (int r : inside) uc.regWrite(r, 0x1000);
            uc.regWrite(outside, 0x3000);
            uc.contextSave(prefix);
            uc.contextSave(all);
            for (int r : inside) uc.regWrite(r, 0x2000);
            uc.regWrite(outside, 0x4000);
            uc.contextRestore(prefix);
            for (int r : inside) assertEquals(0x1000, uc.regRead(r));
            assertEquals(0x4000, uc.regRead(outside));
            uc.contextRestore(all);
            assertEquals(0x3000, uc.regRead(outside));
        }
    }

    /** A batch gives what the single reads give, zero-extended (a selector is written as 2 bytes). */
    @Test
    void x86RegisterBatchEqualsSingleReads() {
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64)) {
            uc.regWrite(X86Reg.RDI, 0x1122_3344_5566_7788L);
            uc.regWrite(X86Reg.RSI, -2);
            uc.regWrite(X86Reg.RIP, 0x4000);
            uc.regWrite(X86Reg.GS_BASE, 0xffff_8880_1f00_0000L);
            int[] regs = {X86Reg.RDI, X86Reg.RSI, X86Reg.RIP, X86Reg.CS, X86Reg.GS_BASE, X86Reg.RFLAGS};
            Unicorn.RegisterBatch batch = uc.registerBatch(regs);
            long[] out = new long[regs.length];
            java.util.Arrays.fill(out, -1);
            batch.read(out);
            long[] single = new long[regs.length];
            for (int i = 0; i < regs.length; i++) single[i] = uc.regRead(regs[i]);
            assertArrayEquals(single, out);
            assertEquals(0x1122_3344_5566_7788L, out[0]);
            assertEquals(0xffff_8880_1f00_0000L, out[4]);
            uc.regWrite(X86Reg.RDI, 7);
            batch.read(out);
            assertEquals(7, out[0], "read again, not cached");
        }
    }

    @Test
    void int3ReachesInterruptHookWithRipAfterIt() {
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64)) {
            byte[] code = {(byte) 0x90, (byte) 0xcc, (byte) 0x90, (byte) 0xf4};
            uc.memMap(BASE, 0x1000, Unicorn.PROT_ALL);
            uc.memWrite(BASE, code);
            List<long[]> seen = new ArrayList<>();
            uc.hookInterrupt((u, intno) -> seen.add(new long[] {intno, u.regRead(X86Reg.RIP)}));
            uc.start(BASE, BASE + 3, 0, 0);
            assertEquals(1, seen.size());
            assertEquals(3, seen.get(0)[0]);
            assertEquals(BASE + 2, seen.get(0)[1]);
        }
    }

    @Test
    void exceptionInHookIsRethrownNotFatal() {
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64)) {
            uc.memMap(BASE, 0x1000, Unicorn.PROT_ALL);
            uc.memWrite(BASE, new byte[] {(byte) 0xcc, (byte) 0x90});
            uc.hookInterrupt((u, intno) -> { throw new IllegalStateException("boom"); });
            HookFailedException e = assertThrows(HookFailedException.class, () -> uc.start(BASE, BASE + 2, 0, 0));
            assertInstanceOf(IllegalStateException.class, e.getCause());
            // the engine is still usable
            assertEquals(BASE + 1, uc.regRead(X86Reg.RIP));
        }
    }

    @Test
    void unmappedAccessIsTypedError() {
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64)) {
            UnicornException e = assertThrows(UnicornException.class, () -> uc.memRead(0x5000_0000L, 4));
            assertEquals(UnicornException.ERR_READ_UNMAPPED, e.error());
            assertTrue(e.getMessage().contains("uc_mem_read"), e.getMessage());
        }
    }

    @Test
    void mmioSeesWrites() {
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64)) {
            List<long[]> writes = new ArrayList<>();
            uc.mmioMap(0x20000, 0x1000, (off, size) -> 0x1234, (off, size, v) -> writes.add(new long[] {off, size, v}));
            byte[] code = Asm.x86("movl $0xabcd, 0x20010\n mov 0x20020, %eax\n", BASE);
            uc.memMap(BASE, 0x1000, Unicorn.PROT_ALL);
            uc.memWrite(BASE, code);
            uc.start(BASE, BASE + code.length, 0, 0);
            assertEquals(1, writes.size());
            assertArrayEquals(new long[] {0x10, 4, 0xabcd}, writes.get(0));
            assertEquals(0x1234, uc.regRead(X86Reg.RAX));
        }
    }

    @Test
    void arm64SysRegHookAndCpRegs() {
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_ARM64, Unicorn.MODE_ARM, Unicorn.CPU_ARM64_A57)) {
            uc.sysRegWrite(3, 6, 1, 1, 0, 0x501);
            assertEquals(0x531, uc.sysRegRead(3, 6, 1, 1, 0) & 0xfff);
            byte[] code = Asm.arm64("mrs x1, cntvct_el0\n msr cntv_cval_el0, x2\n brk #4", (int) BASE);
            uc.memMap(BASE, 0x1000, Unicorn.PROT_ALL);
            uc.memWrite(BASE, code);
            uc.regWrite(Arm64Reg.X2, 777);
            List<Integer> keys = new ArrayList<>();
            List<Long> written = new ArrayList<>();
            uc.hookSysReg(Unicorn.ARM64_INS_MRS, (u, reg, acc) -> {
                keys.add(acc.key());
                u.regWrite(reg, 12345);
                return true;
            });
            uc.hookSysReg(Unicorn.ARM64_INS_MSR, (u, reg, acc) -> {
                keys.add(acc.key());
                written.add(u.regRead(reg));
                return true;
            });
            List<Long> brkPc = new ArrayList<>();
            uc.hookInterrupt((u, intno) -> { brkPc.add(u.regRead(Arm64Reg.PC)); u.stop(); });
            uc.start(BASE, BASE + 0x100, 0, 0);
            assertEquals(List.of(SysRegs.CNTVCT_EL0, SysRegs.CNTV_CVAL_EL0), keys);
            assertEquals(12345, uc.regRead(Arm64Reg.X1));
            assertEquals(List.of(777L), written);
            assertEquals(List.of(BASE + 8), brkPc);
        }
    }
}
