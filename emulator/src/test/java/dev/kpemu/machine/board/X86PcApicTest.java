package dev.kpemu.machine.board;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.x86.X86Cpuid;
import dev.kpemu.machine.x86.X86Layout;
import dev.kpemu.machine.x86.X86LongMode;
import dev.kpemu.machine.x86.X86Machine;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * The PC's APIC option on bare metal: the guest programs the local APIC and the I/O APIC as the
 * Intel SDM and the 82093AA datasheet say (register offsets, LVT and redirection-entry layouts),
 * and the interrupts arrive through its IDT where and when those say: the LAPIC timer after
 * initial count × divisor nanoseconds (QEMU's 1 GHz APIC bus clock), the PIT on I/O APIC pin 2
 * (QEMU's pc: ISA IRQ 0 is GSI 2), the 8259 through LINT0's virtual wire before the APIC is
 * programmed. The PIC-only board is unchanged: no APIC in CPUID, no MADT.
 */
class X86PcApicTest {
    static final long CODE = 0x100000, RESULTS = 0x200000, IDT = 0x6000, STACK = 0x80000;

    static X86Pc board(X86Pc.Interrupts mode) {
        X86Pc pc = new X86Pc(64 << 20, new ByteArrayOutputStream(), false, null, mode);
        X86Machine m = pc.machine();
        X86LongMode.identityMap(m.memory(), 0x10000, 4L << 30);   // covers the APICs' pages
        int limit = X86LongMode.writeGdt(m.memory(), 0x5000);
        X86LongMode.enter(m.engine(), 0x5000, limit, 0x10000);
        m.engine().mmrWrite(X86Reg.IDTR, new Unicorn.X86Mmr(0, IDT, 256 * 16 - 1, 0));
        m.engine().regWrite(X86Reg.RSP, STACK);
        return pc;
    }

    static final String GATES = """
            .macro gate vec, handler
              lea \\handler(%rip), %rax
              mov %ax, 0x6000+\\vec*16
              movw $0x10, 0x6000+\\vec*16+2
              movw $0x8e00, 0x6000+\\vec*16+4
              shr $16, %rax
              mov %ax, 0x6000+\\vec*16+6
              shr $16, %rax
              mov %eax, 0x6000+\\vec*16+8
              movl $0, 0x6000+\\vec*16+12
            .endm
            """;

    static StopReason run(X86Pc pc, String src, long budget) {
        X86Machine m = pc.machine();
        // the APICs' pages are above 2 GiB: addressed through RBX (local APIC) and RSI (I/O APIC)
        m.engine().regWrite(X86Reg.RBX, 0xfee0_0000L);
        m.engine().regWrite(X86Reg.RSI, 0xfec0_0000L);
        byte[] code = Asm.x86(GATES + src, CODE);
        m.memory().write(CODE, code);
        m.setPc(CODE);
        return m.run(budget);
    }

    /**
     * One-shot LAPIC timer, divide by 1, count 1000: the handler runs 1,000 ns (1,000 guest
     * instructions) after the load, reads the vector in ISR, and its EOI clears it.
     */
    @Test
    void localApicTimerInterruptsAfterItsCountAndEoiEndsIt() {
        try (X86Pc pc = board(X86Pc.Interrupts.APIC)) {
            String src = """
                    _start:
                      gate 0x40, timer
                      movl $0x1ff, 0xf0(%rbx)        # SVR: enabled, spurious 0xff
                      movl $0xb, 0x3e0(%rbx)         # divide by 1
                      movl $0x40, 0x320(%rbx)        # LVT timer: vector 0x40, one-shot, unmasked
                      rdtsc
                      mov %eax, 0x200000
                      movl $1000, 0x380(%rbx)        # initial count
                      sti
                    1: hlt
                      cmpl $0, 0x200010
                      je 1b
                      mov 0x100+0x20(%rbx), %eax     # ISR bits 64-95 after EOI
                      mov %eax, 0x20000c
                      cli
                      hlt
                    timer:
                      rdtsc
                      mov %eax, 0x200004
                      mov 0x100+0x20(%rbx), %eax     # ISR bits 64-95: vector 0x40 in service
                      mov %eax, 0x200008
                      movl $0, 0xb0(%rbx)            # EOI
                      movl $1, 0x200010
                      iretq
                    """;
            assertInstanceOf(StopReason.Halted.class, run(pc, src, 1_000_000));
            var mem = pc.machine().memory();
            long loaded = mem.readInt(RESULTS), taken = mem.readInt(RESULTS + 4);
            long delay = taken - loaded;
            assertTrue(delay >= 1000 && delay < 1000 + 64, "interrupt 1,000 ns after the load (+ the instructions to the handler): " + delay);
            assertEquals(1, mem.readInt(RESULTS + 8), "vector 0x40 in service in the handler");
            assertEquals(0, mem.readInt(RESULTS + 12), "EOI cleared it");
        }
    }

    /**
     * The PIT (ISA IRQ 0) reaches the CPU through I/O APIC pin 2's redirection entry (vector
     * 0x30, fixed, physical destination APIC 0, edge) with the 8259 masked; each tick after EOI.
     */
    @Test
    void pitInterruptsThroughIoApicPinTwo() {
        try (X86Pc pc = board(X86Pc.Interrupts.APIC)) {
            String src = """
                    _start:
                      gate 0x30, tick
                      mov $0xff, %al
                      out %al, $0x21                 # 8259s: all masked
                      out %al, $0xa1
                      movl $0x1ff, 0xf0(%rbx)
                      movl $0x14, (%rsi)            # IOREGSEL: redirection entry 2, low
                      movl $0x30, 0x10(%rsi)
                      movl $0x15, (%rsi)            # high: destination APIC 0
                      movl $0, 0x10(%rsi)
                      mov $0x34, %al                 # PIT ch0, lobyte/hibyte, mode 2
                      out %al, $0x43
                      mov $0xa9, %al                 # 1193 = 0x4a9: ~1 ms
                      out %al, $0x40
                      mov $0x04, %al
                      out %al, $0x40
                      sti
                    1: hlt
                      cmpl $3, 0x200000
                      jb 1b
                      cli
                      hlt
                    tick:
                      incl 0x200000
                      movl $0, 0xb0(%rbx)
                      iretq
                    """;
            assertInstanceOf(StopReason.Halted.class, run(pc, src, 100_000_000));
            assertEquals(3, pc.machine().memory().readInt(RESULTS));
            assertEquals(0x30, pc.ioApic().entry(2) & 0xff);
            assertTrue(pc.machine().clock().nanos() > 2_000_000, "three ~1 ms periods: " + pc.machine().clock().nanos());
        }
    }

    /**
     * Before the APIC is programmed the 8259's interrupts reach the CPU through LINT0 (ExtINT,
     * QEMU's reset state of the BSP's LVT), with the 8259's own vector (ICW2 base 0x20 + IRQ 0).
     */
    @Test
    void the8259ReachesTheCpuThroughTheVirtualWire() {
        try (X86Pc pc = board(X86Pc.Interrupts.APIC)) {
            String src = """
                    _start:
                      gate 0x20, tick
                      mov $0x11, %al                 # ICW1: edge, cascade, ICW4
                      out %al, $0x20
                      mov $0x20, %al                 # ICW2: vectors 0x20-0x27
                      out %al, $0x21
                      mov $0x04, %al                 # ICW3: slave on IRQ 2
                      out %al, $0x21
                      mov $0x01, %al                 # ICW4: 8086 mode
                      out %al, $0x21
                      mov $0xfe, %al                 # only IRQ 0
                      out %al, $0x21
                      mov $0x34, %al
                      out %al, $0x43
                      mov $0xa9, %al
                      out %al, $0x40
                      mov $0x04, %al
                      out %al, $0x40
                      sti
                    1: hlt
                      cmpl $2, 0x200000
                      jb 1b
                      cli
                      hlt
                    tick:
                      incl 0x200000
                      mov $0x20, %al                 # 8259 non-specific EOI
                      out %al, $0x20
                      iretq
                    """;
            assertInstanceOf(StopReason.Halted.class, run(pc, src, 100_000_000));
            assertEquals(2, pc.machine().memory().readInt(RESULTS));
        }
    }

    /** CPUID.1:EDX bit 9 and the MADT in the XSDT on the APIC board only. */
    @Test
    void cpuidAndAcpiTablesFollowTheOption() {
        try (X86Pc apic = board(X86Pc.Interrupts.APIC); X86Pc pic = board(X86Pc.Interrupts.PIC)) {
            assertTrue((apic.cpuid().get(1, 0).edx() & X86Cpuid.L1_EDX_APIC) != 0, "APIC board: CPUID has the APIC");
            assertEquals(0, pic.cpuid().get(1, 0).edx() & X86Cpuid.L1_EDX_APIC, "PIC board: no APIC");
            assertNull(pic.localApic());
            for (X86Pc pc : new X86Pc[] {apic, pic}) {
                var mem = pc.machine().memory();
                long xsdt = mem.readLong(pc.rsdp() + 24);
                int entries = (mem.readInt(xsdt + 4) - 36) / 8;
                boolean madt = false;
                for (int i = 0; i < entries; i++) {
                    long t = mem.readLong(xsdt + 36 + 8L * i);
                    madt |= new String(mem.read(t, 4), java.nio.charset.StandardCharsets.US_ASCII).equals("APIC");
                }
                assertEquals(pc == apic, madt, "MADT linked on the APIC board only");
                assertTrue(xsdt >= X86Layout.ACPI_BASE && xsdt < X86Layout.ACPI_BASE + X86Layout.ACPI_SIZE);
            }
        }
    }

    /**
     * An engine fact this board lives with (fails when a Unicorn answers otherwise): Unicorn
     * 2.1.4's {@code rdmsr} of IA32_APIC_BASE (0x1B) reads 0 (its helper hard-codes it; QEMU's CPU
     * reads its APIC's 0xfee00900: base, EN, BSP) and {@code wrmsr} and the host's register write
     * are dropped, and 2.1.4 refuses instruction hooks for RDMSR/WRMSR, so the board cannot answer
     * from {@code LocalApic.apicBase()}. Linux 6.1's boot reads it only in x2apic_setup's
     * {@code __x2apic_disable}, which tests the x2APIC-enable bit, clear in both; Linux 6.9+'s
     * topology code reads the BSP bit (docs/x86-boot-notes.md).
     */
    @Test
    void unicornReadsApicBaseMsrAsZero() {
        try (X86Pc pc = board(X86Pc.Interrupts.APIC)) {
            X86Machine m = pc.machine();
            String src = """
                    _start:
                      mov $0x1b, %ecx
                      rdmsr
                      mov %eax, 0x200000
                      mov %edx, 0x200004
                      mov $0xfee00800, %eax
                      xor %edx, %edx
                      wrmsr
                      rdmsr
                      mov %eax, 0x200008
                      hlt
                    """;
            assertInstanceOf(StopReason.Halted.class, run(pc, src, 1_000_000));
            assertEquals(0, m.memory().readLong(RESULTS));
            assertEquals(0, m.memory().readInt(RESULTS + 8));
            m.engine().msrWrite(0x1b, 0xfee00900L);
            assertEquals(0, m.engine().msrRead(0x1b));
            assertEquals(0xfee00900L, pc.localApic().apicBase(), "the device's own state is QEMU's reset value");
        }
    }
}
