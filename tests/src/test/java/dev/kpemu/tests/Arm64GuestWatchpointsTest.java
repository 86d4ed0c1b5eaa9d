package dev.kpemu.tests;

import static dev.kpemu.tests.KpemuInProcess.kpemu;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.kpemu.image.GuestImages;
import dev.kpemu.machine.Arch;
import dev.kpemu.tests.KpemuInProcess.Run;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
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
    static Path prog;
    static String linuxsTraps;

    @BeforeAll
    static void buildProgramAndReadLinuxsAnswer() throws Exception {
        Path root = Path.of(System.getProperty("kpemu.root", Path.of(System.getProperty("user.dir")).getParent().toString()));
        Path ref = root.resolve("guest-images/reference/arm64/6.1/ptrace-watch.out");
        List<String> lines = Files.readAllLines(ref);
        String release = lines.stream().filter(l -> l.startsWith("# kernel: ")).findFirst().orElseThrow().split(" ")[2];
        Assumptions.assumeTrue(GuestImages.forRepository().kernelVersion(Arch.ARM64).toString().contains(release),
                "the reference was recorded on " + release);
        Matcher m = GuestDebugRegistersTest.TRAPS.matcher(String.join("\n", lines));
        assertTrue(m.find(), "the reference has the program's count: " + lines);
        linuxsTraps = m.group(0);
        assertEquals("ptrace-watch: traps 5 of 5", linuxsTraps, "Linux under QEMU: every write trapped");

        String cc = GuestCommandTest.staticCompiler(Arch.ARM64);
        prog = tmp.resolve("ptrace-watch");
        Process p = new ProcessBuilder(cc, "-static", "-O2", "-o", prog.toString(),
                root.resolve("guest-images/programs/ptrace-watch-arm64.c").toString()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), cc + ": " + out);
    }

    private static Run boot(String... probeArgs) {
        String[] base = {"boot", "--arch", "arm64", "--add", prog + ":/usr/bin/ptrace-watch"};
        String[] args = new String[base.length + probeArgs.length + 2];
        System.arraycopy(base, 0, args, 0, base.length);
        System.arraycopy(probeArgs, 0, args, base.length, probeArgs.length);
        args[args.length - 2] = "--";
        args[args.length - 1] = "ptrace-watch";
        return kpemu(args);
    }

    @Test
    void ptraceWatchpointTrapsAsOnLinuxUnderQemu() {
        Run r = boot();
        assertEquals(0, r.code(), r.out() + r.err());
        Matcher m = GuestDebugRegistersTest.TRAPS.matcher(r.err());      // the command's output reaches kpemu's stderr
        assertTrue(m.find(), r.err());
        assertEquals(linuxsTraps, m.group(0));
        assertTrue(!r.err().contains("ptrace-watch: other stops"), "no stop but the watchpoint's and the steps': " + r.err());
    }

    @Test
    void withKpemusOwnWatchOnTheSameVariableBothSeeEveryWrite() {
        Run r = boot("-e", "p:announce ksys_write buf=%x1:x64 count=%x2:u64",
                "-e", "w:dw w@0:8 v=+0($addr):u64",
                "--trigger", "announce:set_wprobe:dw:buf if count == 0 && comm == \"ptrace-watch\"");
        assertEquals(0, r.code(), r.out() + r.err());
        Matcher m = GuestDebugRegistersTest.TRAPS.matcher(r.err());
        assertTrue(m.find(), r.err());
        assertEquals(linuxsTraps, m.group(0), "the guest's own watchpoint with kpemu's on the same address");

        Matcher address = Pattern.compile("(?m)^ptrace-watch: address (0x[0-9a-f]+)$").matcher(r.err());
        assertTrue(address.find(), r.err());
        List<String> announced = r.out().lines().filter(l -> l.contains(" announce: ") && l.endsWith(" count=0")).toList();
        assertEquals(1, announced.size(), r.out());
        assertTrue(announced.getFirst().contains(" buf=" + address.group(1) + " "), "the child's empty write names its variable: " + announced);
        List<String> dw = r.out().lines().filter(l -> l.contains(" dw: ")).toList();
        assertTrue(dw.size() >= 5, r.out());
        List<String> ips = dw.subList(0, 5).stream().map(l -> l.replaceAll(".* dw: \\((\\S+)\\) .*", "$1")).distinct().toList();
        assertEquals(1, ips.size(), "the child's five stores at one instruction: " + dw.subList(0, 5));
        assertTrue(ips.getFirst().matches("0x[0-9a-f]+"), "a user-mode instruction: " + ips);
        List<Long> values = dw.subList(0, 5).stream().map(l -> Long.parseLong(l.replaceAll(".* v=", ""))).toList();
        assertEquals(List.of(1L, 100L, 101L, 102L, 103L), values, "kpemu's wprobe: the value before each of the child's stores\n" + r.out());
    }
}
