package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.machine.Arch;

/**
 * kpemu's {@code boot --fail} against Linux's own fail_function on the same kernel: the
 * source-built kernel ({@link SourceKernelTest#built}, with {@code CONFIG_FAIL_FUNCTION}) under QEMU
 * with fail_function set up by the guest ({@code guest-images/record-fail-function.sh}, recorded
 * here at test time: nobody recorded this kernel before), and under kpemu with the same case's
 * initramfs, whose /init then injects nothing itself, and {@code --fail 'FUNC=RETVAL,times=1,comm=CMD'}.
 * For each case of {@code guest-images/reference/fail-function/cases}: the command's exit status
 * and output are equal, the kernel's other messages are equal, and kpemu reports as many injections
 * of the function as Linux printed "FAULT_INJECTION: forcing a failure." (verbose=1).
 */
@Tag("source-kernel")
class SourceKernelFailFunctionTest {
    static final Path CASES = SourceKernelTest.ROOT.resolve("guest-images/reference/fail-function/cases");

    /** One case: its name, the function (SYS_ = the arch's system-call entry prefix), the return value, the command. */
    record Case(String name, String function, long retval, String command) {
        String function(Arch arch) {
            return function.startsWith("SYS_") ? (arch == Arch.X86_64 ? "__x64_sys_" : "__arm64_sys_") + function.substring(4) : function;
        }
        String comm() { return command.split(" ")[0]; }
    }

    /** What the case's /init printed between its markers. */
    record Answer(int status, List<String> output, List<String> kernelMessages) {}

    static List<Case> cases() throws IOException {
        List<Case> out = new ArrayList<>();
        for (String l : Files.readAllLines(CASES)) {
            if (l.isBlank() || l.startsWith("#")) continue;
            String[] f = l.trim().split("\\s+", 4);
            out.add(new Case(f[0], f[1], Long.parseLong(f[2]), f[3]));
        }
        return out;
    }

    static Stream<Arguments> archCases() throws IOException {
        List<Case> c = cases();
        return Stream.of(Arch.values()).flatMap(a -> c.stream().map(k -> Arguments.of(a, k.name())));
    }

    @ParameterizedTest(name = "{1} on {0}")
    @MethodSource("archCases")
    void failEqualsLinuxFailFunction(Arch arch, String name) throws Exception {
        Case c = caseNamed(name);
        SourceKernelTest.Built k = SourceKernelTest.built(arch);
        Answer linux = recordLinux(arch, c, k);
        String func = c.function(arch);
        long linuxInjections = injections(linux);
        Path dir = dir(arch);
        Path console = dir.resolve(name + ".kpemu.console");
        KpemuInProcess.Run r = KpemuInProcess.kpemu("boot", "--arch", arch.linuxName(), "--kernel", k.image().toString(),
                "--initrd", dir.resolve(name + ".cpio").toString(), "--append", append(arch, ""),
                "--console", console.toString(), "--timeout", "120",
                "--fail", func + "=" + c.retval() + ",times=1,comm=" + c.comm());
        assertEquals(0, r.code(), () -> "kpemu boot --fail: " + r.err());
        Answer kpemu = answer(Files.readAllLines(console, StandardCharsets.ISO_8859_1));

        assertEquals(linux.status(), kpemu.status(), name + ": the command's exit status");
        assertEquals(linux.output(), kpemu.output(), name + ": the command's output");
        assertEquals(withoutInjectionReport(linux.kernelMessages()), withoutInjectionReport(kpemu.kernelMessages()),
                name + ": the kernel's messages besides fail_function's own");
        // the report on stderr, one a failure (the trace's kpemu/fail_function lines on stdout are the same injections)
        long reported = r.err().lines().filter(l -> l.startsWith("kpemu: fail_function: " + func + " ")).count();
        assertEquals(linuxInjections, reported, name + ": kpemu reports each injection of " + func + " (as verbose=1):\n" + r.out() + r.err());
    }

    /**
     * The machine under the comparison: Linux's own fail_function (the case's /init sets it up when
     * the command line says {@code kpemu_fail=linux}: the guest's kprobe at the function's entry and
     * its override of the return) runs in kpemu as under QEMU, to the same status, output and
     * kernel messages, fail_function's report included.
     */
    @ParameterizedTest(name = "{1} on {0}")
    @MethodSource("archCases")
    void linuxFailFunctionAnswersAlikeInKpemu(Arch arch, String name) throws Exception {
        Case c = caseNamed(name);
        SourceKernelTest.Built k = SourceKernelTest.built(arch);
        Answer linux = recordLinux(arch, c, k);
        Path dir = dir(arch);
        Path console = dir.resolve(name + ".kpemu-linux.console");
        KpemuInProcess.Run r = KpemuInProcess.kpemu("boot", "--arch", arch.linuxName(), "--kernel", k.image().toString(),
                "--initrd", dir.resolve(name + ".cpio").toString(), "--append", append(arch, " kpemu_fail=linux"),
                "--console", console.toString(), "--timeout", "120");
        assertEquals(0, r.code(), () -> "kpemu boot: " + r.err());
        Answer kpemu = answer(Files.readAllLines(console, StandardCharsets.ISO_8859_1));
        assertEquals(1, injections(kpemu), name + ": Linux failed the call once in kpemu too: " + kpemu);
        assertEquals(linux.status(), kpemu.status(), name + ": the command's exit status");
        assertEquals(linux.output(), kpemu.output(), name + ": the command's output");
        assertEquals(withoutAsynchronous(linux.kernelMessages()), withoutAsynchronous(kpemu.kernelMessages()), name + ": the kernel's messages");
    }

    static Case caseNamed(String name) throws IOException {
        return cases().stream().filter(k -> k.name().equals(name)).findFirst().orElseThrow();
    }

    static Path dir(Arch arch) {
        return SourceKernelTest.WORK.resolve("fail-function/" + arch.linuxName());
    }

    /** The reference boots' command line (record-fail-function.sh's, without QEMU's timing options) plus {@code extra}. */
    static String append(Arch arch, String extra) {
        return (arch == Arch.X86_64 ? "console=ttyS0" : "console=ttyAMA0") + " nokaslr panic=-1 quiet" + extra;
    }

    /** Linux's answer to the case under QEMU, recorded now on the built kernel; the case's initramfs kept beside it. */
    static Answer recordLinux(Arch arch, Case c, SourceKernelTest.Built k) throws Exception {
        Path dir = dir(arch);
        Files.createDirectories(dir);
        Path ref = dir.resolve(c.name() + ".txt");
        Files.deleteIfExists(ref);
        Path log = dir.resolve("record-" + c.name() + ".log");
        SourceKernelTest.Run rec = SourceKernelTest.run(List.of("bash",
                SourceKernelTest.ROOT.resolve("guest-images/record-fail-function.sh").toString(),
                "--kernel", k.image().toString(), "--out-dir", dir.toString(), "--initramfs-dir", dir.toString(),
                arch.linuxName(), c.name()), log, Map.of(), 1800);
        assertEquals(0, rec.exit(), () -> "record-fail-function.sh failed:\n" + SourceKernelTest.tail(log));
        List<String> recorded = Files.readAllLines(ref, StandardCharsets.ISO_8859_1);
        assertTrue(recorded.stream().anyMatch(l -> l.startsWith("# kernel: " + k.release() + " ")), "Linux's answer was recorded on the built kernel");
        Answer linux = answer(recorded);
        assertEquals(1, injections(linux), "Linux failed the call once (times=1): " + linux);
        return linux;
    }

    /** fail_function's reports (verbose=1) among a case's kernel messages. */
    static long injections(Answer a) {
        return a.kernelMessages().stream().filter(l -> l.equals("FAULT_INJECTION: forcing a failure.")).count();
    }

    /** The markers' content of a case's console (the recording's or kpemu's). */
    static Answer answer(List<String> lines) {
        int status = Integer.MIN_VALUE;
        List<String> output = new ArrayList<>(), kmsg = new ArrayList<>();
        List<String> into = null;
        for (String raw : lines) {
            if (raw.startsWith("#")) continue;   // the recording's header (which quotes the /init)
            String l = raw.replace("\r", "");
            int at = l.indexOf("KPEMU-FAIL-");
            String m = at >= 0 ? l.substring(at) : l;
            if (m.startsWith("KPEMU-FAIL-STATUS ")) status = Integer.parseInt(m.substring(18).trim());
            else if (m.equals("KPEMU-FAIL-OUTPUT-BEGIN")) into = output;
            else if (m.equals("KPEMU-FAIL-KMSG-BEGIN")) into = kmsg;
            else if (m.equals("KPEMU-FAIL-OUTPUT-END") || m.equals("KPEMU-FAIL-KMSG-END")) into = null;
            else if (into != null) into.add(l);
        }
        assertTrue(status != Integer.MIN_VALUE, "the case ran to its status line:\n" + String.join("\n", lines));
        return new Answer(status, output, kmsg);
    }

    /**
     * The kernel's messages without fail_function's report (kpemu injects from outside: the guest
     * prints none), and without what {@link #withoutAsynchronous} leaves out.
     */
    static List<String> withoutInjectionReport(List<String> kmsg) {
        List<String> out = new ArrayList<>();
        for (String l : withoutAsynchronous(kmsg)) {
            if (l.equals("FAULT_INJECTION: forcing a failure.") || l.startsWith("name fail_function, ")) continue;
            out.add(l);
        }
        return out;
    }

    /**
     * The kernel's messages without those Linux prints asynchronously, whenever a timer of wall
     * time ends: x86's PS/2 mouse probe line (its i8042 probe ends under QEMU before, during or
     * after the command; kpemu's board has no such mouse), and x86's refined TSC calibration with
     * the clocksource switch it makes (a delayed work about a second of guest time after boot: under
     * QEMU on a loaded host the command may already be running; `.ci/run` met it there, 2026-12-01).
     */
    static List<String> withoutAsynchronous(List<String> kmsg) {
        return kmsg.stream().filter(l -> !(l.startsWith("input: ") && l.contains("i8042"))
                && !l.startsWith("tsc: Refined TSC clocksource calibration")
                && !l.startsWith("clocksource: tsc: mask") && !l.equals("clocksource: Switched to clocksource tsc")).toList();
    }
}
