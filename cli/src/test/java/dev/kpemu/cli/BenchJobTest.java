package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@code kpemu bench job}: bad options are one-line usage errors (and {@code bench events}' too); a short run on x86-64 (QEMU TCG
 * with Linux's own kprobes against kpemu, both live) reports both rows and both sides' events. Not
 * timed: the figures are whatever the machine gives; only the run's structure is checked.
 */
class BenchJobTest {
    @Test
    void nonPositiveRoundsOrRepeatIsAUsageError() {
        for (String what : new String[] {"job", "events"}) {
            for (String[] bad : new String[][] {{"--rounds", "0"}, {"--repeat", "0"}}) {
                CliTest.Run r = CliTest.run("bench", what, "--arch", "x86_64", bad[0], bad[1]);
                assertEquals(ExitCodes.USAGE, r.code(), what + ": " + r.out() + r.err());
                assertTrue(r.err().startsWith("kpemu: " + bad[0] + " must be positive"), what + ": " + r.err());
            }
        }
    }

    @Test
    @Tag("kernel")
    @Tag("scale")
    void bothMachinesTraceTheJob() {
        CliTest.Run r = CliTest.run("bench", "job", "--arch", "x86_64", "--rounds", "5", "--repeat", "1");
        assertEquals(ExitCodes.OK, r.code(), r.out() + r.err());
        String num = "\\s+(-?\\d+\\.\\d+)";
        Matcher plain = Pattern.compile("x86_64\\s+plain\\s+5 \\|" + num + num + "\\s+\\S+ \\|" + num + num + "\\s+\\S+ \\|\\s+- +- \\|\\s+(\\d+)\\s+(\\d+)")
                .matcher(r.out());
        assertTrue(plain.find(), r.out());
        Matcher probed = Pattern.compile("x86_64\\s+probed\\s+5 \\|" + num + num + "\\s+\\S+ \\|" + num + num + "\\s+\\S+ \\|\\s+(\\d+)\\s+(\\d+) \\|")
                .matcher(r.out());
        assertTrue(probed.find(), r.out());
        long kpemuEvents = Long.parseLong(probed.group(5)), qemuEvents = Long.parseLong(probed.group(6));
        assertTrue(kpemuEvents > 0 && qemuEvents > 0, "both sides traced the job: " + r.out());
        assertTrue(r.out().contains("x86_64  per event, us, median [least, greatest] of 1 pair(s):"), r.out());
        assertTrue(r.out().contains("x86_64    marginal, over 0 rounds:      CPU kpemu "), r.out());
        Matcher zero = Pattern.compile("x86_64\\s+probed\\s+0 \\|.*\\|\\s+(\\d+)\\s+(\\d+) \\|").matcher(r.out());
        assertTrue(zero.find(), "the pair at 0 rounds: " + r.out());
        assertTrue(Pattern.compile("x86_64  kernel \\S+; 294 probes on both machines; 1 pair\\(s\\)").matcher(r.out()).find(),
                "the glob's 287 functions and the 7 single definitions on both sides: " + r.out());
        assertTrue(r.err().contains("kpemu bench job: x86_64 pair 1 of 1: QEMU traced " + qemuEvents + " events in 5 rounds"), r.err());
        assertTrue(r.err().contains("kpemu bench job: x86_64 pair 1 of 1: kpemu traced " + kpemuEvents + " events in 5 rounds"), r.err());
        // the kpemu command it runs, printed once: a boot of the job's initramfs with the definitions at /init
        Matcher runs = Pattern.compile("kpemu bench job: x86_64: kpemu runs as: \\S+/bin/java .* dev\\.kpemu\\.cli\\.Main boot --arch x86_64 "
                + "--initrd \\S+/job\\.cpio --append 'console=ttyS0 nokaslr panic=-1 job_rounds=5' .* --from-init --events-file \\S+/job\\.x86_64\\.events -o \\S+")
                .matcher(r.err());
        assertTrue(runs.find(), r.err());
    }
}
