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
    static final Pattern TRAPS = Pattern.compile("(?m)^ptrace-watch: traps (\\d+) of (\\d+)$");
    @TempDir static Path tmp;
    static Path prog;
    static String linuxsTraps;

    @BeforeAll
    static void buildProgramAndReadLinuxsAnswer() throws Exception {
        Path root = Path.of(System.getProperty("kpemu.root", Path.of(System.getProperty("user.dir")).getParent().toString()));
        Path ref = root.resolve("guest-images/reference/x86_64/6.1/ptrace-watch.out");
        List<String> lines = Files.readAllLines(ref);
        String release = lines.stream().filter(l -> l.startsWith("# kernel: ")).findFirst().orElseThrow().split(" ")[2];
        Assumptions.assumeTrue(GuestImages.forRepository().kernelVersion(Arch.X86_64).toString().contains(release),
                "the reference was recorded on " + release);
        Matcher m = TRAPS.matcher(String.join("\n", lines));
        assertTrue(m.find(), "the reference has the program's count: " + lines);
        linuxsTraps = m.group(0);
        assertEquals("ptrace-watch: traps 5 of 5", linuxsTraps, "Linux under QEMU: every write trapped");

        String cc = GuestCommandTest.staticCompiler(Arch.X86_64);
        prog = tmp.resolve("ptrace-watch");
        Process p = new ProcessBuilder(cc, "-static", "-O2", "-o", prog.toString(),
                root.resolve("guest-images/programs/ptrace-watch.c").toString()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), cc + ": " + out);
    }

    private static Run boot(String... probeArgs) {
        String[] base = {"boot", "--arch", "x86_64", "--add", prog + ":/usr/bin/ptrace-watch"};
        String[] args = new String[base.length + probeArgs.length + 2];
        System.arraycopy(base, 0, args, 0, base.length);
        System.arraycopy(probeArgs, 0, args, base.length, probeArgs.length);
        args[args.length - 2] = "--";
        args[args.length - 1] = "ptrace-watch";
        return kpemu(args);
    }

    @Test
    void ptraceDataBreakpointTrapsAsOnLinuxUnderQemu() {
        Run r = boot();
        assertEquals(0, r.code(), r.out() + r.err());
        Matcher m = TRAPS.matcher(r.err());      // the command's output reaches kpemu's stderr
        assertTrue(m.find(), r.err());
        assertEquals(linuxsTraps, m.group(0));
    }

    @Test
    void withKpemusOwnWatchOnTheSameVariableBothSeeEveryWrite() {
        Run r = boot("-e", "p:announce ksys_write buf=%si:x64 count=%dx:u64",
                "-e", "w:dw w@0:8 v=+0($addr):u64",
                "--trigger", "announce:set_wprobe:dw:buf if count == 0 && comm == \"ptrace-watch\"");
        assertEquals(0, r.code(), r.out() + r.err());
        Matcher m = TRAPS.matcher(r.err());      // the command's output reaches kpemu's stderr
        assertTrue(m.find(), r.err());
        assertEquals(linuxsTraps, m.group(0), "the guest's own watchpoint with kpemu's on the same address");

        Matcher address = Pattern.compile("(?m)^ptrace-watch: address (0x[0-9a-f]+)$").matcher(r.err());
        assertTrue(address.find(), r.err());
        List<String> announced = r.out().lines().filter(l -> l.contains(" announce: ") && l.endsWith(" count=0")).toList();
        assertEquals(1, announced.size(), r.out());
        assertTrue(announced.getFirst().contains(" buf=" + address.group(1) + " "), "the child's empty write names its variable: " + announced);
        String child = announced.getFirst().strip().split("\\s+")[0];
        for (String l : r.out().lines().filter(l -> l.contains(" dw: ")).toList())
            assertEquals(child, l.strip().split("\\s+")[0], "a user-mode store's record names the storing task (the child): " + l);
        List<Long> values = r.out().lines().filter(l -> l.contains(" dw: ")).map(l -> Long.parseLong(l.replaceAll(".* v=", ""))).toList();
        assertEquals(List.of(100L, 101L, 102L, 103L, 104L), values, "kpemu's wprobe: the child's five writes, values as the program writes them\n" + r.out());
    }
}
