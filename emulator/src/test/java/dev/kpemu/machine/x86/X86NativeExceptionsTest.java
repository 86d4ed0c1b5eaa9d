package dev.kpemu.machine.x86;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.StopReason;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * Faults delivered by the native hook ({@link NativeExceptions}) as the CPU delivers them (Intel
 * SDM vol. 3A, 6.12-6.14): a guest drops to CPL 3 and takes two #PF (a user write to a not-present
 * page: error code 6), a #DE (no error code) on the TSS's RSP0 stack and a #GP (hlt at CPL 3, error
 * code 0) through IST 1; RSP0 and IST 1 are not 16-byte aligned, so the CPU aligns them down. The
 * expected frames are the architecture's, written out below; the same guest run with the Java path
 * ({@code -Dkpemu.x86.nativeExceptions=false}) ends with every register, the results and both
 * stacks the same and the same instruction count.
 */
class X86NativeExceptionsTest {
    static final long CODE = X86MachineTest.CODE, RESULTS = X86MachineTest.RESULTS;
    static final long TSS = 0x7000, RSP0 = 0x90008, IST1 = 0xa0008, USER_STACK = 0x300000;
    static final int USER_DS = 0x23, USER_CS = 0x2b, TSS_SEL = 0x30;

    static final String SRC = X86MachineTest.SETUP_GATES + """
            .macro record from, slots
              mov 0x200000, %rbx
              shl $6, %rbx
              lea \\from(%rsp), %rax
              mov %rax, 0x200100(%rbx)
              .set i, 0
              .rept \\slots
              mov \\from+8*i(%rsp), %rax
              mov %rax, 0x200108+8*i(%rbx)
              .set i, i+1
              .endr
              incq 0x200000
            .endm
            _start:
              lea pf1(%rip), %rax
              mov %rax, 0x200008
              lea pf2(%rip), %rax
              mov %rax, 0x200010
              lea de(%rip), %rax
              mov %rax, 0x200018
              lea gp(%rip), %rax
              mov %rax, 0x200020
              gate 14, pf_handler
              gate 0, de_handler
              gate 13, gp_handler
              movb $1, IDT_BASE+13*16+4
              lidt idtr(%rip)
              mov $0x30, %ax
              ltr %ax
              pushq $0x23
              pushq $0x300000
              pushq $0x2
              pushq $0x2b
              lea user(%rip), %rax
              push %rax
              iretq
            user:
            pf1:
              movq $1, 0x800000
            pf2:
              movq $2, 0x801000
              xor %ecx, %ecx
              xor %edx, %edx
              mov $5, %eax
            de:
              div %ecx
            gp:
              hlt
            pf_handler:
              push %rax
              push %rbx
              record 16, 6
              mov %cr2, %rax
              and $~0xfff, %rax
              mov %rax, %rbx
              shr $12, %rbx
              sub $0x800, %rbx
              or $7, %rax
              mov %rax, 0x10000(,%rbx,8)
              mov %cr2, %rax
              invlpg (%rax)
              pop %rbx
              pop %rax
              add $8, %rsp
              iretq
            de_handler:
              push %rax
              push %rbx
              record 16, 5
              addq $2, 16(%rsp)
              pop %rbx
              pop %rax
              iretq
            gp_handler:
              record 0, 6
              hlt
            idtr: .word 0xfff
              .quad 0x6000
            """;

    /** X86MachineTest's paged machine with user pages, user segments and a TSS (RSP0, IST 1) in its GDT. */
    private static X86Machine userCapable() {
        X86Machine m = X86MachineTest.paged();
        var mem = m.memory();
        long pml4 = 0x1000, pdpt = 0x2000, pd = 0x3000;
        mem.writeLong(pml4, mem.readLong(pml4) | 4);
        mem.writeLong(pdpt, mem.readLong(pdpt) | 4);
        for (int i = 0; i < 8; i++) mem.writeLong(pd + 8L * i, mem.readLong(pd + 8L * i) | 4);   // the first 16 MiB, the fault area's tables too
        mem.writeLong(0x5000 + (USER_DS & ~7), 0x00cf_f300_0000_ffffL);   // data, DPL 3
        mem.writeLong(0x5000 + (USER_CS & ~7), 0x00af_fb00_0000_ffffL);   // code64, DPL 3
        mem.writeLong(0x5000 + TSS_SEL, 0x67 | (TSS & 0xffffff) << 16 | 0x89L << 40);   // available 64-bit TSS, DPL 0
        mem.writeLong(0x5000 + TSS_SEL + 8, 0);
        m.engine().mmrWrite(X86Reg.GDTR, new Unicorn.X86Mmr(0, 0x5000, TSS_SEL + 15, 0));
        mem.write(TSS, new byte[0x68]);
        mem.writeLong(TSS + 4, RSP0);
        mem.writeLong(TSS + 0x24, IST1);
        return m;
    }

    private record Run(long[] registers, byte[] results, byte[] stacks, long instructions, long native_) {}

    private static final int[] REGISTERS = {X86Reg.RAX, X86Reg.RBX, X86Reg.RCX, X86Reg.RDX, X86Reg.RSP, X86Reg.RIP, X86Reg.RFLAGS,
            X86Reg.CS, X86Reg.SS, X86Reg.CR2};

    private static Run run(boolean nativeExceptions) {
        String was = System.getProperty("kpemu.x86.nativeExceptions");
        System.setProperty("kpemu.x86.nativeExceptions", Boolean.toString(nativeExceptions));
        try (X86Machine m = userCapable()) {
            m.memory().write(CODE, Asm.x86(SRC, CODE));
            m.setPc(CODE);
            StopReason r = m.run(1_000_000);
            assertInstanceOf(StopReason.Halted.class, r, r.toString());
            long[] regs = new long[REGISTERS.length + 1];
            for (int i = 0; i < REGISTERS.length; i++) regs[i] = m.engine().regRead(REGISTERS[i]);
            regs[REGISTERS.length] = m.cpl();
            long nat = 0;
            for (long n : m.nativeExceptionsDelivered()) nat += n;
            return new Run(regs, m.memory().read(RESULTS, 0x200), m.memory().read(0x8f000, 0x12000), m.clock().instructions(), nat);
        } finally {
            if (was == null) System.clearProperty("kpemu.x86.nativeExceptions");
            else System.setProperty("kpemu.x86.nativeExceptions", was);
        }
    }

    @Test
    void faultsDeliveredNativelyAsTheCpuAndTheJavaPathDeliverThem() {
        assumeTrue(NativeExceptions.available(), "kpemu's native library has no kpemu_x86_exception");
        Run nat = run(true);
        assertEquals(4, nat.native_(), "two #PF, #DE and #GP delivered natively");
        long[] r = new long[0x200 / 8];
        java.nio.ByteBuffer.wrap(nat.results()).order(java.nio.ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(r);
        assertEquals(4, r[0], "records");
        long pf1 = r[1], pf2 = r[2], de = r[3], gp = r[4];   // the labels' addresses, stored by the guest
        long kernelStack = RSP0 & ~0xfL, istStack = IST1 & ~0xfL;
        // record k at 0x100 + 0x40 k: the handler's frame address, then the frame
        long[][] want = {
                {kernelStack - 48, 6, pf1, USER_CS, 0x2, USER_STACK, USER_DS},
                {kernelStack - 48, 6, pf2, USER_CS, 0x2, USER_STACK, USER_DS},
                {kernelStack - 40, de, USER_CS, -1, USER_STACK, USER_DS},
                {istStack - 48, 0, gp, USER_CS, -1, USER_STACK, USER_DS},
        };
        for (int k = 0; k < want.length; k++) {
            for (int i = 0; i < want[k].length; i++) {
                if (want[k][i] == -1) continue;   // RFLAGS after the division: its arithmetic flags are undefined
                assertEquals(want[k][i], r[0x100 / 8 + 8 * k + i], "record " + k + " word " + i);
            }
        }
        assertEquals(0, nat.registers()[REGISTERS.length], "the #GP handler runs at CPL 0");

        Run java = run(false);
        assertEquals(0, java.native_());
        assertArrayEquals(java.registers(), nat.registers(), "registers and CPL");
        assertArrayEquals(java.results(), nat.results(), "the frames the handlers saw");
        assertArrayEquals(java.stacks(), nat.stacks(), "RSP0 and IST stacks");
        assertEquals(java.instructions(), nat.instructions(), "instructions");
    }

    /**
     * A frame that lands on a page of guarded text is the Java path's, whose host writes update the
     * guard's expected bytes: with a guarded range over the RSP0 stack's SS slot, the two #PF and
     * the #DE (their frames on that page) reach Java and the #GP (IST stack, another page) stays
     * native; written natively, the guard would still expect the slot's old bytes.
     */
    @Test
    void aFrameOnGuardedTextsPageIsLeftToTheJavaPath() {
        assumeTrue(NativeExceptions.available(), "kpemu's native library has no kpemu_x86_exception");
        try (X86Machine m = userCapable()) {
            m.memory().write(CODE, Asm.x86(SRC, CODE));
            long ssSlot = (RSP0 & ~0xfL) - 8;
            int[] reported = {0};
            int id = m.textGuard().add(ssSlot, ssSlot, 8, (i, va, pa, expected, now) -> reported[0]++);
            m.setPc(CODE);
            StopReason r = m.run(1_000_000);
            assertInstanceOf(StopReason.Halted.class, r, r.toString());
            assertEquals(1, m.faultsDeliveredNatively(), "only the #GP on the IST stack natively");
            assertEquals(USER_DS, m.memory().readLong(ssSlot), "the last frame's SS");
            assertArrayEquals(m.memory().read(ssSlot, 8), m.textGuard().expected(id), "the host's frame writes updated the expected bytes");
            assertEquals(0, reported[0]);
        }
    }
}
