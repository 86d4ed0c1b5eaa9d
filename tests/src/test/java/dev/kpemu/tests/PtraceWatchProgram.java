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

/**
 * The guest program behind the guest-debug-register tests ({@code guest-images/programs/ptrace-watch*.c}):
 * it is compiled statically for one arch, and Linux's own count of its traps is read from the
 * recording made under QEMU on the same kernel ({@code reference/ARCH/6.1/ptrace-watch.out}).
 * A test boots it with its own probe arguments and compares the program's count with Linux's.
 */
record PtraceWatchProgram(Arch arch, Path binary, String linuxsTraps) {
    static final Pattern TRAPS = Pattern.compile("(?m)^ptrace-watch: traps (\\d+) of (\\d+)$");

    /** Builds {@code source} for {@code arch} into {@code tmp}, after reading Linux's answer (the test is skipped on another kernel). */
    static PtraceWatchProgram build(Arch arch, String source, Path tmp) throws Exception {
        Path root = Path.of(System.getProperty("kpemu.root", Path.of(System.getProperty("user.dir")).getParent().toString()));
        Path ref = root.resolve("guest-images/reference/" + arch.linuxName() + "/6.1/ptrace-watch.out");
        List<String> lines = Files.readAllLines(ref);
        String release = lines.stream().filter(l -> l.startsWith("# kernel: ")).findFirst().orElseThrow().split(" ")[2];
        Assumptions.assumeTrue(GuestImages.forRepository().kernelVersion(arch).toString().contains(release),
                "the reference was recorded on " + release);
        Matcher m = TRAPS.matcher(String.join("\n", lines));
        assertTrue(m.find(), "the reference has the program's count: " + lines);
        assertEquals("ptrace-watch: traps 5 of 5", m.group(0), "Linux under QEMU: every write trapped");

        String cc = GuestCommandTest.staticCompiler(arch);
        Path binary = tmp.resolve("ptrace-watch");
        Process p = new ProcessBuilder(cc, "-static", "-O2", "-o", binary.toString(),
                root.resolve("guest-images/programs/" + source).toString()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), cc + ": " + out);
        return new PtraceWatchProgram(arch, binary, m.group(0));
    }

    /** {@code kpemu boot} of the default workload with the program added and run as the command, with {@code probeArgs}. */
    Run boot(String... probeArgs) {
        String[] base = {"boot", "--arch", arch.linuxName(), "--add", binary + ":/usr/bin/ptrace-watch"};
        String[] args = new String[base.length + probeArgs.length + 2];
        System.arraycopy(base, 0, args, 0, base.length);
        System.arraycopy(probeArgs, 0, args, base.length, probeArgs.length);
        args[args.length - 2] = "--";
        args[args.length - 1] = "ptrace-watch";
        return kpemu(args);
    }

    /** Asserts the run exited 0 and the program counted its traps as under Linux (the command's output reaches kpemu's stderr). */
    void assertTrapsAsLinux(Run r, String message) {
        assertEquals(0, r.code(), r.out() + r.err());
        Matcher m = TRAPS.matcher(r.err());
        assertTrue(m.find(), r.err());
        assertEquals(linuxsTraps, m.group(0), message);
    }

    /** The address of its variable the program printed. */
    static String variableAddress(Run r) {
        Matcher address = Pattern.compile("(?m)^ptrace-watch: address (0x[0-9a-f]+)$").matcher(r.err());
        assertTrue(address.find(), r.err());
        return address.group(1);
    }
}
