package dev.kpemu.tests;

import static dev.kpemu.tests.KpemuInProcess.kpemu;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;
import dev.kpemu.tests.KpemuInProcess.Run;

/**
 * Issue 26, determinism with races: a program of the test's own races two processes, pinned to
 * the two CPUs of a 2-CPU guest ({@code kpemu boot --cpus 2 --sched-seed S}), on two kernel
 * objects they share after {@code fork}: a counter in a file that each increments 32 times by a
 * non-atomic read-modify-write through system calls ({@code pread}, +1, {@code pwrite}: updates
 * are lost when the two interleave between the read and the write), and an {@code O_APPEND} file
 * each appends its letter to once per round (the order of the letters is the order in which the
 * two CPUs got through {@code write}'s inode lock). The program prints the final counter and the
 * letters; a kprobe on the {@code pwrite64} system call puts each write in the trace with its CPU
 * and the value it writes (fetched from the user buffer, {@code +u0(…):u64}).
 *
 * <p>What a seed promises, checked on Debian 12's 6.1 on both arches: the same seed twice gives
 * byte-identical trace (timestamps included), kernel console and program output; the two seeds
 * here give different interleavings, seen as different program output (letters and counter), a
 * different order of the two CPUs' probe events and different values in each CPU's own sequence
 * of events; and at least one of them loses updates (the race is real, not serialized by the
 * emulator). The trace agrees with the output: the final counter is the value of one of the two
 * processes' last {@code pwrite}s. No value is written down for a seed: what the
 * interleavings are is the schedule's business, that they repeat and differ is the promise.
 */
@Tag("kernel")
@Tag("smp")
class SmpRaceTest {
    static final int ROUNDS = 32;
    static final long SEED_A = 1, SEED_B = 2;

    static final String PROGRAM = """
            #define _GNU_SOURCE
            #include <fcntl.h>
            #include <sched.h>
            #include <stdio.h>
            #include <stdlib.h>
            #include <sys/mman.h>
            #include <sys/wait.h>
            #include <unistd.h>
            #define ROUNDS %d
            static void pin(int cpu) {
                cpu_set_t s;
                CPU_ZERO(&s);
                CPU_SET(cpu, &s);
                if (sched_setaffinity(0, sizeof s, &s) != 0) { perror("sched_setaffinity"); exit(2); }
            }
            int main(void) {
                int fd = open("/tmp/counter", O_RDWR | O_CREAT | O_TRUNC, 0600);
                int log = open("/tmp/order", O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0600);
                if (fd < 0 || log < 0) { perror("open"); return 2; }
                long v = 0;
                pwrite(fd, &v, sizeof v, 0);
                int *ready = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
                pid_t child = fork();
                int me = child == 0;                 /* parent: A on CPU 0, child: B on CPU 1 */
                pin(me);
                __atomic_add_fetch(ready, 1, __ATOMIC_SEQ_CST);
                while (__atomic_load_n(ready, __ATOMIC_SEQ_CST) < 2) ;
                for (int i = 0; i < ROUNDS; i++) {
                    pread(fd, &v, sizeof v, 0);      /* read ...                          */
                    write(log, me ? "B" : "A", 1);
                    v++;                             /* ... modify ...                    */
                    pwrite(fd, &v, sizeof v, 0);     /* ... write: the other's update may be lost */
                }
                if (child == 0) _exit(0);
                waitpid(child, NULL, 0);
                char order[2 * ROUNDS + 1] = {0};
                pread(fd, &v, sizeof v, 0);
                pread(log, order, 2 * ROUNDS, 0);
                printf("race: counter %%ld of %%d, order %%s\\n", v, 2 * ROUNDS, order);
                return 0;
            }
            """.formatted(ROUNDS);

    static final Pattern OUTPUT = Pattern.compile("race: counter (\\d+) of " + 2 * ROUNDS + ", order ([AB]{" + 2 * ROUNDS + "})\n");

    /** One run's bytes: the trace (stdout), the program's output and the kernel console. */
    record Outcome(String trace, String output, byte[] console, long counter, String order, String cpuOrder,
                   Map<String, List<Long>> valuesPerCpu) {}

    @ParameterizedTest
    @EnumSource(Arch.class)
    void aSeedNamesOneInterleavingOfARaceAndAnotherSeedAnother(Arch arch, @TempDir Path tmp) throws Exception {
        Path src = Files.writeString(tmp.resolve("race.c"), PROGRAM);
        Path prog = tmp.resolve("kpemu-race");
        String cc = GuestCommandTest.staticCompiler(arch);
        Process p = new ProcessBuilder(cc, "-static", "-O2", "-o", prog.toString(), src.toString()).redirectErrorStream(true).start();
        String ccOut = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), cc + ": " + ccOut);

        Map<Long, Outcome> first = new HashMap<>();
        for (long seed : new long[] {SEED_A, SEED_B}) {
            Outcome a = run(arch, prog, seed, tmp.resolve("console-" + seed + "-a"));
            Outcome b = run(arch, prog, seed, tmp.resolve("console-" + seed + "-b"));
            System.out.println(arch.linuxName() + " seed " + seed + ": " + a.output().strip() + "; CPUs of the pwrites " + a.cpuOrder()
                    + "; values per CPU " + a.valuesPerCpu());
            assertEquals(a.output(), b.output(), "seed " + seed + ": the program's output repeats");
            assertEquals(a.trace(), b.trace(), "seed " + seed + ": the trace repeats, timestamps included");
            assertArrayEquals(a.console(), b.console(), "seed " + seed + ": the kernel console's bytes repeat");
            first.put(seed, a);
        }
        Outcome a = first.get(SEED_A), b = first.get(SEED_B);
        assertNotEquals(a.order(), b.order(), "two seeds, two orders of the appends");
        assertNotEquals(a.cpuOrder(), b.cpuOrder(), "two seeds, two orders of the CPUs' pwrite events");
        for (String cpu : List.of("0", "1"))
            assertNotEquals(a.valuesPerCpu().get(cpu), b.valuesPerCpu().get(cpu), "two seeds, two sequences of values on CPU " + cpu);
        assertTrue(a.counter() < 2 * ROUNDS || b.counter() < 2 * ROUNDS,
                "the read-modify-writes race: some update is lost (" + a.counter() + ", " + b.counter() + ")");
    }

    /**
     * The race with {@code seed}; the trace holds one event per {@code pwrite64} with its CPU and
     * the value written: the system call's wrapper gets the user's registers ({@code struct
     * pt_regs *}: x86-64 {@code %di}, the buffer in {@code si} at +104; arm64 {@code %x0}, the
     * buffer in {@code regs[1]} at +8).
     */
    static Outcome run(Arch arch, Path prog, long seed, Path console) throws Exception {
        String syscall = arch == Arch.X86_64 ? "__x64_sys_pwrite64" : "__arm64_sys_pwrite64";
        String value = arch == Arch.X86_64 ? "v=+u0(+104(%di)):u64" : "v=+u0(+8(%x0)):u64";
        Run r = kpemu("boot", "--arch", arch.linuxName(), "--cpus", "2", "--sched-seed", Long.toString(seed),
                "--add", prog + ":/usr/bin/kpemu-race", "-e", "p:pw " + syscall + " " + value, "--console", console.toString(),
                "--", "kpemu-race");
        assertEquals(0, r.code(), r.err());
        Matcher m = OUTPUT.matcher(r.err());
        assertTrue(m.matches(), "the program's one line: " + r.err());
        String order = m.group(2);
        assertEquals(ROUNDS, order.chars().filter(c -> c == 'A').count(), order);
        long counter = Long.parseLong(m.group(1));
        assertTrue(counter >= 1 && counter <= 2 * ROUNDS, r.err());
        // kpemu-race's pwrites after the fork (the first line is the parent's zeroing, before it): 2 x ROUNDS, each on its CPU
        Pattern event = Pattern.compile("^\\s*kpemu-race-\\d+\\s+\\[00([01])\\] \\S+\\s+[\\d.]+: pw: \\(" + syscall
                + "\\+0x0/0x\\p{XDigit}+\\) v=(\\d+)$");
        StringBuilder cpus = new StringBuilder();
        Map<String, List<Long>> values = new TreeMap<>();
        for (String line : r.out().lines().toList()) {
            Matcher e = event.matcher(line);
            if (!e.matches()) continue;
            if (cpus.isEmpty()) assertEquals("0", e.group(2), "the parent's zeroing, before the fork: " + line);
            else values.computeIfAbsent(e.group(1), k -> new ArrayList<>()).add(Long.parseLong(e.group(2)));
            cpus.append(e.group(1));
        }
        assertEquals(2 * ROUNDS + 1, cpus.length(), "one event per pwrite:\n" + r.out());
        String cpuOrder = cpus.substring(1);
        assertEquals(ROUNDS, cpuOrder.chars().filter(c -> c == '0').count(), "the parent's pwrites on CPU 0 (pinned): " + cpuOrder);
        assertTrue(values.values().stream().anyMatch(v -> v.getLast() == counter),
                "the last completed pwrite is one of the two processes' last: " + counter + ", " + values);
        return new Outcome(r.out(), r.err(), Files.readAllBytes(console), counter, order, cpuOrder, values);
    }
}
