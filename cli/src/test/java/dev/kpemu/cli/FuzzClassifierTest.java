package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import dev.kpemu.cli.FuzzClassifier.Category;

/**
 * {@code kpemu fuzz}'s classifier, comparison of refusals and console parsing, on inputs Linux
 * recorded: the values of issue 32 (QEMU's {@code %r11} at {@code __x64_sys_getppid+5}), Linux's
 * own survey of the corpus workload ({@code guest-images/reference/x86_64/6.1/corpus.survey}), its
 * corpus trace (the return trampoline) and its error_log ({@code dialect.error_log}).
 */
class FuzzClassifierTest {
    static final Path REFERENCE = Path.of("..", "guest-images", "reference", "x86_64", "6.1");

    static FuzzClassifier.Evidence survey(Map<String, String> leftOut, List<FuzzDifference> second) throws Exception {
        Map<String, Long> calls = new HashMap<>(), outside = new HashMap<>();
        for (String l : Files.readAllLines(REFERENCE.resolve("corpus.survey"))) {
            if (l.startsWith("#") || l.isBlank()) continue;
            String[] f = l.trim().split("\\s+");
            calls.put(f[0], Long.parseLong(f[1]));
            outside.put(f[0], Long.parseLong(f[2]));
        }
        return new FuzzClassifier.Evidence(second, outside, calls, leftOut);
    }

    @Test
    void aValueOfTheKernelImageIsAKpemuDefect() throws Exception {
        // issue 32: QEMU's Linux printed 0xffffffff82ad4448 for %r11 at __x64_sys_getppid+5, kpemu 0x0
        FuzzDifference d = new FuzzDifference("event", "p:c1 __x64_sys_getppid+5 a0=%r11:x64", "__x64_sys_getppid", "argument a0",
                "0xffffffff82ad4448", "0x0", 12);
        FuzzClassifier.Classified c = FuzzClassifier.classify(d, survey(Map.of(), List.of()));
        assertEquals(Category.KPEMU_DEFECT, c.category(), c.reason());
        assertEquals("kpemu-defect | event | argument | __x64_sys_getppid", c.key());
    }

    @Test
    void theBreakpointPathBeforeLinuxsOptimizerRanIsMachineDependent() throws Exception {
        // Linux 6.1 under QEMU (kpemu fuzz seed 7301128, set 0): "..Zff" at vfs_parse_fs_param+0x20 in one run, "....." in another
        FuzzDifference d = new FuzzDifference("event", "p:c8 vfs_parse_fs_param+32 a0=%flags:b1@9/64", "vfs_parse_fs_param", "latency",
                "..Zff", ".....", 1);
        FuzzClassifier.Classified c = FuzzClassifier.classify(d, survey(Map.of(), List.of()));
        assertEquals(Category.MACHINE, c.category());
        assertTrue(c.reason().contains("OPTIMIZE_DELAY"), c.reason());
    }

    @Test
    void aSecondLinuxRunDifferingAtThePlaceIsLinuxsOwnFlakiness() throws Exception {
        FuzzDifference d = new FuzzDifference("event", "p:c4 do_unlinkat a0=$comm", "do_unlinkat", "argument a0", "\"rm\"", "\"exe\"", 1);
        FuzzDifference again = new FuzzDifference("event", "p:c4 do_unlinkat a0=$comm", "do_unlinkat", "argument a0", "\"rm\"", "\"exe\"", 1);
        assertEquals(Category.LINUX_FLAKY, FuzzClassifier.classify(d, survey(Map.of(), List.of(again))).category());
        // the second run differing elsewhere is no evidence
        FuzzDifference elsewhere = new FuzzDifference("event", "", "do_unlinkat", "argument a0", "\"rm\"", "\"exe\"", 7);
        assertEquals(Category.KPEMU_DEFECT, FuzzClassifier.classify(d, survey(Map.of(), List.of(elsewhere))).category());
        // a refusal: the second run refused what the first accepted
        FuzzDifference r = new FuzzDifference("refusal", "r1a111 vfs_read", "vfs_read", "accepted", "accepted", "refused: Invalid maxactive number", -1);
        FuzzDifference r2 = new FuzzDifference("refusal", "r1a111 vfs_read", "vfs_read", "accepted", "accepted", "refused: ", -1);
        assertEquals(Category.LINUX_FLAKY, FuzzClassifier.classify(r, survey(Map.of(), List.of(r2))).category());
    }

    @Test
    void aFunctionLinuxRunsOutsideTheWorkloadIsMachineDependent() throws Exception {
        // the survey: ____fput 45 calls, 15 outside the workload's task context
        FuzzDifference d = new FuzzDifference("event", "p:c3 ____fput", "____fput", "event", "nothing (missing)", "c3: (____fput+0x0/0x20)", 40);
        FuzzClassifier.Classified c = FuzzClassifier.classify(d, survey(Map.of(), null));
        assertEquals(Category.MACHINE, c.category());
        assertTrue(c.reason().contains("15 of 45"), c.reason());
    }

    @Test
    void perBootAddressesAndTheReturnTrampolineAreMachineDependent() throws Exception {
        // x86-64's direct map starts at 0xffff888000000000 (Linux's Documentation/arch/x86/x86_64/mm.rst)
        FuzzDifference heap = new FuzzDifference("event", "p:c2 vfs_mkdir a0=%si:x64", "vfs_mkdir", "argument a0",
                "0xffff888003c1e480", "0xffff888004a20900", 3);
        assertEquals(Category.MACHINE, FuzzClassifier.classify(heap, survey(Map.of(), null)).category());
        // one kernel-image value is not an allocation
        FuzzDifference mixed = new FuzzDifference("event", "p:c2 vfs_mkdir a0=%si:x64", "vfs_mkdir", "argument a0",
                "0xffffffff82ad4448", "0xffff888004a20900", 3);
        assertEquals(Category.KPEMU_DEFECT, FuzzClassifier.classify(mixed, survey(Map.of(), null)).category());
        // corpus.trace: "c131: (path_parentat+0x0/0x90) a0=arch_rethook_trampoline+0x0/0x60"
        FuzzDifference ret = new FuzzDifference("event", "p:c131 path_parentat a0=+0($stack):symbol", "path_parentat", "argument a0",
                "arch_rethook_trampoline+0x0/0x60", "filename_parentat+0x3d/0x60", 9);
        assertEquals(Category.MACHINE, FuzzClassifier.classify(ret, survey(Map.of(), null)).category());
    }

    @Test
    void aProcPidNameIsMachineDependent() throws Exception {
        // arm64 6.12, seed 7301131, set 17: Linux under QEMU "126", kpemu "124"
        FuzzDifference d = new FuzzDifference("event", "p:c7 proc_pid_get_link a0=+0(+40(+24(%x0))):string", "proc_pid_get_link",
                "argument a0", "\"126\"", "\"124\"", 1);
        assertEquals(Category.MACHINE, FuzzClassifier.classify(d, survey(Map.of(), null)).category());
        FuzzDifference word = new FuzzDifference("event", "", "proc_pid_get_link", "argument a0", "\"126\"", "\"self\"", 1);
        assertEquals(Category.KPEMU_DEFECT, FuzzClassifier.classify(word, survey(Map.of(), null)).category());
    }

    @Test
    void aLeftOutFunctionIsItsOwnClass() throws Exception {
        FuzzDifference d = new FuzzDifference("event", "p:c0 schedule_tail", "schedule_tail", "argument a0", "1", "2", 0);
        FuzzClassifier.Classified c = FuzzClassifier.classify(d, survey(Map.of("schedule_tail", "a machine path (CorpusGenerator.MACHINE_PATHS)"), null));
        assertEquals(Category.LEFT_OUT, c.category());
        assertNotEquals(FuzzClassifier.classify(d, survey(Map.of(), null)).key(), c.key());
    }

    @Test
    void refusalsAndErrorLogMessagesAreCompared() throws Exception {
        // dialect.error_log: Linux 6.1 refused "r1a111 vfs_read" with "Invalid maxactive number"
        List<String> defs = List.of("p:corpus_mount path_mount type=+0(%dx):string", "p:corpus_exec bprm_execve file=+0(+0(%dx)):string",
                "r1a111 vfs_read", "p:c1 vfs_read");
        String console = String.join("\n", "KPEMU-CORPUS-REFUSED r1a111 vfs_read",
                "KPEMU-ERROR-LOG [    3.141592] trace_kprobe: error: Invalid maxactive number",
                "KPEMU-ERROR-LOG   Command: r1a111 vfs_read", "KPEMU-ERROR-LOG             ^",
                "KPEMU-CORPUS-TRACE-BEGIN", "KPEMU-CORPUS-TRACE-END", "");
        FuzzRun linux = LinuxFuzzRun.parseConsole(console, "qemu");
        assertNull(linux.failure());
        assertEquals(Map.of("r1a111 vfs_read", "trace_kprobe: error: Invalid maxactive number"), linux.refused());
        FuzzRun kpemuSame = new FuzzRun(Map.of("r1a111 vfs_read", "trace_kprobe: error: Invalid maxactive number"), List.of(), "kpemu", null);
        FuzzRun kpemuOther = new FuzzRun(Map.of("r1a111 vfs_read", "trace_kprobe: error: Maxactive is not for kprobe"), List.of(), "kpemu", null);
        FuzzRun kpemuAccepts = new FuzzRun(Map.of(), List.of(), "kpemu", null);
        assertTrue(FuzzComparison.compare(dev.kpemu.machine.Arch.X86_64, "6.1.0-56-amd64", defs, linux, kpemuSame).identical());
        List<FuzzDifference> other = FuzzComparison.compare(dev.kpemu.machine.Arch.X86_64, "6.1.0-56-amd64", defs, linux, kpemuOther).differences();
        assertEquals(1, other.size());
        assertEquals("error_log", other.getFirst().kind());
        List<FuzzDifference> accepts = FuzzComparison.compare(dev.kpemu.machine.Arch.X86_64, "6.1.0-56-amd64", defs, linux, kpemuAccepts).differences();
        assertEquals("refusal", accepts.getFirst().kind());
        assertEquals("vfs_read", accepts.getFirst().function());
        // a console that never reaches the trace's end is a boot that did not finish
        assertTrue(LinuxFuzzRun.parseConsole("KPEMU-CORPUS-TRACE-BEGIN\n", "qemu").failure() != null);
    }

    @Test
    void badOptionsAreOneLineUsageErrors() {
        CliTest.Run noLimit = CliTest.run("fuzz", "--arch", "x86_64", "--kernel", "debian:bookworm", "--seed", "1");
        assertEquals(ExitCodes.USAGE, noLimit.code());
        assertTrue(noLimit.err().contains("give --seconds N or --sets N"), noLimit.err());
        assertTrue(!noLimit.err().contains("Exception"), noLimit.err());
        CliTest.Run badSize = CliTest.run("fuzz", "--arch", "x86_64", "--kernel", "debian:bookworm", "--seed", "1", "--sets", "1", "--set-size", "0");
        assertEquals(ExitCodes.USAGE, badSize.code());
        assertTrue(badSize.err().contains("--set-size takes 1 to 200"), badSize.err());
        CliTest.Run badArch = CliTest.run("fuzz", "--arch", "mips", "--kernel", "debian:bookworm", "--seed", "1", "--sets", "1");
        assertEquals(ExitCodes.USAGE, badArch.code());
    }
}
