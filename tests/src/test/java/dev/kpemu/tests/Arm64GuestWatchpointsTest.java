package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kpemu.machine.Arch;
import dev.kpemu.tests.KpemuInProcess.Run;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 28: the guest's own arm64 watchpoints (DBGWVR0/DBGWCR0, {@code Arm64DebugRegisters}) keep
 * working beside kpemu's. The static program {@code guest-images/programs/ptrace-watch-arm64.c}
 * forks; the parent sets watchpoint 0 of its child on the child's variable (stores, 8 bytes, EL0)
 * with {@code PTRACE_SETREGSET NT_ARM_HW_WATCH}, and counts the SIGTRAPs (TRAP_HWBKPT at the
 * variable) while the child writes it 5 times, stepping over each trapped store with the slot off
 * ({@code PTRACE_SINGLESTEP}) as gdb does, since arm64 traps before the access. Linux's answer,
 * recorded under QEMU TCG on the same kernel ({@code guest-images/record-ptrace-watch.sh arm64},
 * {@code reference/arm64/6.1/ptrace-watch.out}): "traps 5 of 5". kpemu prints the same alone, and
 * with a wprobe of its own on the same variable (pointed at it by {@code set_wprobe} from a kprobe
 * of {@code ksys_write}, which sees the child's empty write of the variable's address): the
 * program still counts every trap, and the wprobe reports each of the five stores once (the
 * trapped attempt is not a store; the one made after the step is), at one instruction, with the
 * value before it (arm64's rule: 1, then 100 to 103, as the program writes 1 then 100 to 104).
 * The watch follows the variable's physical page, which the kernel reuses once the child has
 * exited: records after the first five are not the child's and are not compared.
 */
@Tag("kernel")
class Arm64GuestWatchpointsTest {
    @TempDir static Path tmp;
    static PtraceWatchProgram program;

    @BeforeAll
    static void buildProgramAndReadLinuxsAnswer() throws Exception {
        program = PtraceWatchProgram.build(Arch.ARM64, "ptrace-watch-arm64.c", tmp);
    }

    @Test
    void ptraceWatchpointTrapsAsOnLinuxUnderQemu() {
        Run r = program.boot();
        program.assertTrapsAsLinux(r, "the guest's own watchpoint");
        assertTrue(!r.err().contains("ptrace-watch: other stops"), "no stop but the watchpoint's and the steps': " + r.err());
    }

    @Test
    void withKpemusOwnWatchOnTheSameVariableBothSeeEveryWrite() {
        Run r = program.boot("-e", "p:announce ksys_write buf=%x1:x64 count=%x2:u64",
                "-e", "w:dw w@0:8 v=+0($addr):u64",
                "--trigger", "announce:set_wprobe:dw:buf if count == 0 && comm == \"ptrace-watch\"");
        program.assertTrapsAsLinux(r, "the guest's own watchpoint with kpemu's on the same address");

        String address = PtraceWatchProgram.variableAddress(r);
        List<String> announced = r.out().lines().filter(l -> l.contains(" announce: ") && l.endsWith(" count=0")).toList();
        assertEquals(1, announced.size(), r.out());
        assertTrue(announced.getFirst().contains(" buf=" + address + " "), "the child's empty write names its variable: " + announced);
        List<String> dw = r.out().lines().filter(l -> l.contains(" dw: ")).toList();
        assertTrue(dw.size() >= 5, r.out());
        List<String> ips = dw.subList(0, 5).stream().map(l -> l.replaceAll(".* dw: \\((\\S+)\\) .*", "$1")).distinct().toList();
        assertEquals(1, ips.size(), "the child's five stores at one instruction: " + dw.subList(0, 5));
        assertTrue(ips.getFirst().matches("0x[0-9a-f]+"), "a user-mode instruction: " + ips);
        List<Long> values = dw.subList(0, 5).stream().map(l -> Long.parseLong(l.replaceAll(".* v=", ""))).toList();
        assertEquals(List.of(1L, 100L, 101L, 102L, 103L), values, "kpemu's wprobe: the value before each of the child's stores\n" + r.out());
    }
}
