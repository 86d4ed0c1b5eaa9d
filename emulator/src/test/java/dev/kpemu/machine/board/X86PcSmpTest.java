package dev.kpemu.machine.board;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayOutputStream;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.Machine;
import dev.kpemu.machine.StopReason;
import dev.kpemu.machine.x86.X86LongMode;
import dev.kpemu.machine.x86.X86Machine;
import dev.kpemu.testing.Asm;
import dev.kpemu.unicorn.Unicorn;
import dev.kpemu.unicorn.X86Reg;

/**
 * The PC with several CPUs on bare metal: the BSP starts an AP as Linux's {@code do_boot_cpu}
 * does (INIT, then STARTUP with a vector through its local APIC's ICR), and the AP starts in real
 * mode at CS = vector &lt;&lt; 8, IP = 0 (physical vector &lt;&lt; 12), goes to protected and long mode
 * by itself as Linux's trampoline does, answers CPUID with its own APIC ID and sees its own local
 * APIC at 0xfee00000. Expected values are the SDM's (INIT/SIPI, CPUID.1:EBX[31:24], the APIC ID
 * register's bits 31:24).
 */
class X86PcSmpTest {
    static final long CODE = 0x100000, RESULTS = 0x200000, AP = 0x9000;
    static final int VECTOR = (int) (AP >> 12);

    static X86Pc board(int cpus) {
        X86Pc pc = new X86Pc(64 << 20, new ByteArrayOutputStream(), false, null, X86Pc.Interrupts.APIC, cpus);
        X86Machine m = pc.machine();
        X86LongMode.identityMap(m.memory(), 0x10000, 4L << 30);   // covers the local APIC's page
        int limit = X86LongMode.writeGdt(m.memory(), 0x5000);
        X86LongMode.enter(m.engine(), 0x5000, limit, 0x10000);
        m.engine().regWrite(X86Reg.RSP, 0x80000);
        m.engine().regWrite(X86Reg.RBX, 0xfee0_0000L);
        return pc;
    }

    /** The AP's code, at physical 0x9000 (segment offsets from 0): real mode, then protected mode, then long mode. */
    static final String AP_CODE = """
            .code16
              cli
              mov %cs, %ax
              mov %ax, %ds
              movw $0x1234, 0x800             # DS = CS: physical 0x9800
              mov $1, %eax
              cpuid
              mov %ebx, 0x804                 # CPUID.1:EBX, initial APIC ID in 31:24
              lgdtl gdtr
              mov $1, %eax
              mov %eax, %cr0                  # PE
              ljmpl $0x08, $0x9000 + pm32
            .code32
            pm32:
              mov $0x18, %ax
              mov %ax, %ds
              mov %ax, %ss
              mov %cr4, %eax
              or $0x20, %eax                  # PAE
              mov %eax, %cr4
              mov $0x10000, %eax
              mov %eax, %cr3
              mov $0xc0000080, %ecx           # EFER.LME
              rdmsr
              or $0x100, %eax
              wrmsr
              mov %cr0, %eax
              or $0x80000001, %eax            # PG
              mov %eax, %cr0
              ljmp $0x10, $0x9000 + lm64
            .code64
            lm64:
              mov $0xfee00020, %ebx
              mov (%rbx), %eax                # the local APIC's ID register, as this CPU sees it
              mov %eax, 0x9808
              movabs $0x1122334455667788, %rax
              mov %rax, 0x9810
            1: cli
              hlt
              jmp 1b
            .align 8
            gdt: .quad 0, 0x00cf9b000000ffff, 0x00af9b000000ffff, 0x00cf93000000ffff
            gdtr: .word 31
              .long 0x9000 + gdt
            """;

    static StopReason run(X86Pc pc, String bsp) {
        X86Machine m = pc.machine();
        m.memory().write(AP, Asm.x86(AP_CODE, 0));
        m.memory().write(CODE, Asm.x86(bsp, CODE));
        m.setPc(CODE);
        return m.run(10_000_000);
    }

    @Test
    void initThenStartupStartsTheApInRealModeAtTheVector() {
        try (X86Pc pc = board(2)) {
            X86Machine m = pc.machine();
            assertEquals(Machine.CpuState.STOPPED, m.cpuState(1), "an AP waits for its STARTUP");
            String bsp = """
                      movl $0x01000000, 0x310(%rbx)   # ICR high: destination APIC ID 1
                      movl $0x00004500, 0x300(%rbx)   # INIT, level assert
                      movl $0x01000000, 0x310(%rbx)
                      movl $0x00004600 + VECTOR, 0x300(%rbx) # STARTUP, the vector
                    1: pause
                      cmpq $0, 0x9810
                      je 1b
                      mov 0x20(%rbx), %eax            # this CPU's own ID register
                      mov %eax, 0x200000
                      mov $1, %eax
                      cpuid
                      mov %ebx, 0x200004
                      cli
                      hlt
                    """.replace("VECTOR", Integer.toString(VECTOR));
            assertInstanceOf(StopReason.Halted.class, run(pc, bsp));
            var mem = m.memory();
            assertEquals(0x1234, mem.readInt(0x9800) & 0xffff, "real mode: CS base = vector << 12, DS loaded from CS");
            assertEquals(1, mem.readInt(0x9804) >>> 24, "the AP's CPUID.1:EBX[31:24]");
            assertEquals(1, mem.readInt(0x9808) >>> 24, "the AP's local APIC ID register");
            assertEquals(0x1122334455667788L, mem.readLong(0x9810), "the AP reached long mode");
            assertEquals(0, mem.readInt(RESULTS) >>> 24, "the BSP's local APIC ID register");
            assertEquals(0, mem.readInt(RESULTS + 4) >>> 24, "the BSP's CPUID.1:EBX[31:24]");
            assertEquals(Machine.CpuState.HALTED, m.cpuState(1));
        }
    }

    @Test
    void initAloneLeavesTheApStopped() {
        try (X86Pc pc = board(2)) {
            String bsp = """
                      movl $0x01000000, 0x310(%rbx)
                      movl $0x00004500, 0x300(%rbx)   # INIT, no STARTUP
                      mov $100000, %ecx
                    1: loop 1b
                      cli
                      hlt
                    """;
            assertInstanceOf(StopReason.Halted.class, run(pc, bsp));
            assertEquals(Machine.CpuState.STOPPED, pc.machine().cpuState(1));
            assertEquals(0, pc.machine().memory().readInt(0x9800), "the AP ran nothing");
        }
    }

    @Test
    void severalCpusNeedTheApicBoard() {
        var e = assertThrows(IllegalArgumentException.class, () -> new X86Pc(64 << 20, new ByteArrayOutputStream(), false, null, X86Pc.Interrupts.PIC, 2));
        assertEquals("several CPUs need the APIC board (X86Pc.Interrupts.APIC): the 8259-only PC cannot start APs", e.getMessage());
    }
}
