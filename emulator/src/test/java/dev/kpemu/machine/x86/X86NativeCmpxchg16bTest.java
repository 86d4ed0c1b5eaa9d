package dev.kpemu.machine.x86;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.WatchHit;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.X86Reg;

/**
 * {@code cmpxchg16b} (and 64-bit {@code lahf}/{@code sahf}) executed by kpemu's native
 * invalid-instruction hook ({@link NativeCmpxchg16b}) on a bare-metal machine, against the
 * architecture (Intel SDM vol. 2A, CMPXCHG8B/CMPXCHG16B, LAHF, SAHF): equal RDX:RAX and m128
 * store RCX:RBX and set ZF; unequal load m128 into RDX:RAX and clear ZF; the other flags are
 * kept; a misaligned operand is #GP(0) at the instruction. Every program first does
 * {@code add $1} to 0x7fffffffffffffff in the same block, which by hand gives OF, SF, AF and PF
 * (result 0x8000000000000000, low byte 0x00) and bit 1: RFLAGS 0x896 before the instruction.
 */
class X86NativeCmpxchg16bTest {
    static final long CODE = X86MachineTest.CODE, DATA = X86MachineTest.RESULTS;
    static final long ZF = 1 << 6, BEFORE = 0x896;

    @BeforeAll
    static void nativeHookPresent() {
        assumeTrue(NativeCmpxchg16b.available(), "kpemu's native library predates kpemu_cmpxchg16b");
    }

    static final String PROLOGUE = X86MachineTest.SETUP_GATES + """
            _start:
              gate 13, gp_handler
              lidt idtr(%rip)
              mov $0x200000, %rsi
              xor %eax, %eax
              xor %edx, %edx
              mov $1, %ebx
              mov $2, %ecx
              mov $0x7fffffffffffffff, %r8
              jmp 1f
            1: add $1, %r8
            """;
    static final String EPILOGUE = """
              pushfq
              pop %r9
              hlt
            gp_handler:
              pop %r12
              mov (%rsp), %r13
              mov $0xdead, %r9
              hlt
            idtr: .word 0xfff
              .quad 0x6000
            .balign 16
            slot: .quad 0, 0
            """;

    static void run(String body, long[] data, Consumer<X86Machine> check) {
        run(body, data, m -> { }, check);
    }

    static void run(String body, long[] data, Consumer<X86Machine> setup, Consumer<X86Machine> check) {
        try (X86Machine m = X86MachineTest.paged()) {
            for (int i = 0; i < data.length; i++) m.memory().writeLong(DATA + 8L * i, data[i]);
            setup.accept(m);
            m.memory().write(CODE, Asm.x86(PROLOGUE + body + EPILOGUE, CODE));
            m.setPc(CODE);
            StopReason r = m.run(1_000_000);
            assertInstanceOf(StopReason.Halted.class, r, r.toString());
            check.accept(m);
        }
    }

    @Test
    void equalStoresRcxRbxAndSetsOnlyZf() {
        run("  lock cmpxchg16b (%rsi)\n", new long[] {0, 0}, m -> {
            assertEquals(BEFORE | ZF, m.engine().regRead(X86Reg.R9));
            assertEquals(1, m.memory().readLong(DATA));
            assertEquals(2, m.memory().readLong(DATA + 8));
        });
    }

    @Test
    void unequalLoadsRdxRaxAndClearsOnlyZf() {
        run("  cmp %rax, %rax\n  jmp 2f\n2: add $1, %r8\n  lock cmpxchg16b (%rsi)\n", new long[] {5, 6}, m -> {
            // cmp sets ZF; the add (0x8000000000000000 + 1 = 0x8000000000000001) gives SF and bit 1 only
            assertEquals(0x82, m.engine().regRead(X86Reg.R9));
            assertEquals(5, m.engine().regRead(X86Reg.RAX));
            assertEquals(6, m.engine().regRead(X86Reg.RDX));
            assertEquals(5, m.memory().readLong(DATA), "memory unchanged");
            assertEquals(6, m.memory().readLong(DATA + 8), "memory unchanged");
        });
    }

    @Test
    void gsRelativeOperand() {
        run("""
                  mov %eax, %r10d
                  mov $0xc0000101, %ecx
                  mov $0x200000, %eax
                  wrmsr
                  mov %r10d, %eax
                  mov $2, %ecx
                  mov $0x7fffffffffffffff, %r8
                  jmp 3f
                3: add $1, %r8
                  lock cmpxchg16b %gs:0x20
                """, new long[] {9, 9, 9, 9, 0, 0}, m -> {
            assertEquals(BEFORE | ZF, m.engine().regRead(X86Reg.R9));
            assertEquals(1, m.memory().readLong(DATA + 0x20));
            assertEquals(2, m.memory().readLong(DATA + 0x28));
            assertEquals(9, m.memory().readLong(DATA + 0x10), "nothing else written");
        });
    }

    @Test
    void ripRelativeOperand() {
        run("""
                  lock cmpxchg16b slot(%rip)
                  mov slot(%rip), %r10
                  mov slot+8(%rip), %r11
                """, new long[0], m -> {
            assertEquals(1, m.engine().regRead(X86Reg.R10));
            assertEquals(2, m.engine().regRead(X86Reg.R11));
        });
        // the flags of the exchange itself (the movs after it change none)
        run("  lock cmpxchg16b slot(%rip)\n  pushfq\n  pop %r9\n  hlt\n", new long[0],
                m -> assertEquals(BEFORE | ZF, m.engine().regRead(X86Reg.R9)));
    }

    @Test
    void misalignedOperandIsGeneralProtectionAtTheInstruction() {
        run("""
                  lea bad(%rip), %r14
                  add $8, %rsi
                bad: lock cmpxchg16b (%rsi)
                """, new long[] {0, 0, 0}, m -> {
            assertEquals(0xdead, m.engine().regRead(X86Reg.R9), "#GP handler ran");
            assertEquals(0, m.engine().regRead(X86Reg.R12), "error code 0");
            assertEquals(m.engine().regRead(X86Reg.R14), m.engine().regRead(X86Reg.R13), "return RIP is the instruction");
            assertEquals(0, m.memory().readLong(DATA + 8), "nothing written");
        });
    }

    @Test
    void lahfAndSahfIn64BitMode() {
        run("  lahf\n  mov %eax, %r10d\n  mov $0x4100, %eax\n  sahf\n", new long[0], m -> {
            assertEquals(0x9600, m.engine().regRead(X86Reg.R10), "AH = SF ZF AF PF CF of 0x896, bit 1 set");
            assertEquals(0x843, m.engine().regRead(X86Reg.R9), "OF kept, low byte from AH 0x41 (ZF, CF) and bit 1");
        });
    }

    /**
     * A watched store after the native exchange reports its own instruction. The hook once wrote
     * RIP with Unicorn's register write, after which the engine skipped the pc sync of every memory
     * hook until its next exit request: the store was reported at the start of its block.
     */
    @Test
    void aWatchedStoreAfterItReportsItsOwnPc() {
        List<WatchHit> hits = new ArrayList<>();
        run("""
                  lock cmpxchg16b (%rsi)
                  lea store(%rip), %r14
                  mov $7, %r10
                  inc %r10
                store: mov %r10, 0x40(%rsi)
                  mov 0x40(%rsi), %r11
                """, new long[] {0, 0, 0, 0, 0, 0, 0, 0, 0},
                m -> m.watchpoints().add(DATA + 0x40, 8, false, true, hits::add),
                m -> {
                    assertEquals(1, hits.size(), hits.toString());
                    assertEquals(m.engine().regRead(X86Reg.R14), hits.get(0).pc(), "the store's own address");
                    assertEquals(8, m.engine().regRead(X86Reg.R11), "the store was made");
                });
    }
}
