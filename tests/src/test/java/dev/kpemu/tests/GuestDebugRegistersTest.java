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
 * Issue 28: the guest's own x86-64 debug registers keep working beside kpemu's watchpoints. The
 * static program {@code guest-images/programs/ptrace-watch.c} forks; the parent sets its child's
 * DR0 (the child's variable) and DR7 (L0, writes, 8 bytes) with ptrace {@code PTRACE_POKEUSER} and
 * counts the SIGTRAPs while the child writes the variable 5 times. Linux's answer, recorded under
 * QEMU TCG on the same kernel ({@code guest-images/record-ptrace-watch.sh x86_64},
 * {@code reference/x86_64/6.1/ptrace-watch.out}): "traps 5 of 5". kpemu prints the same alone,
 * and with a wprobe of its own on the same variable (pointed at it by {@code set_wprobe} from a
 * kprobe of {@code ksys_write}, which sees the child's empty write of the variable's address):
 * the program still counts every trap, and the wprobe reports each write with the value the
 * program wrote (100, 101, ..., as its source says), by the child (its task-pid as in the
 * ksys_write record).
 */
@Tag("kernel")
class GuestDebugRegistersTest {
    @TempDir static Path tmp;
    static PtraceWatchProgram program;

    @BeforeAll
    static void buildProgramAndReadLinuxsAnswer() throws Exception {
        program = PtraceWatchProgram.build(Arch.X86_64, "ptrace-watch.c", tmp);
    }

    @Test
    void ptraceDataBreakpointTrapsAsOnLinuxUnderQemu() {
        program.assertTrapsAsLinux(program.boot(), "the guest's own debug registers");
    }

    @Test
    void withKpemusOwnWatchOnTheSameVariableBothSeeEveryWrite() {
        Run r = program.boot("-e", "p:announce ksys_write buf=%si:x64 count=%dx:u64",
                "-e", "w:dw w@0:8 v=+0($addr):u64",
                "--trigger", "announce:set_wprobe:dw:buf if count == 0 && comm == \"ptrace-watch\"");
        program.assertTrapsAsLinux(r, "the guest's own watchpoint with kpemu's on the same address");

        String address = PtraceWatchProgram.variableAddress(r);
        List<String> announced = r.out().lines().filter(l -> l.contains(" announce: ") && l.endsWith(" count=0")).toList();
        assertEquals(1, announced.size(), r.out());
        assertTrue(announced.getFirst().contains(" buf=" + address + " "), "the child's empty write names its variable: " + announced);
        String child = announced.getFirst().strip().split("\\s+")[0];
        for (String l : r.out().lines().filter(l -> l.contains(" dw: ")).toList())
            assertEquals(child, l.strip().split("\\s+")[0], "a user-mode store's record names the storing task (the child): " + l);
        List<Long> values = r.out().lines().filter(l -> l.contains(" dw: ")).map(l -> Long.parseLong(l.replaceAll(".* v=", ""))).toList();
        assertEquals(List.of(100L, 101L, 102L, 103L, 104L), values, "kpemu's wprobe: the child's five writes, values as the program writes them\n" + r.out());
    }
}
