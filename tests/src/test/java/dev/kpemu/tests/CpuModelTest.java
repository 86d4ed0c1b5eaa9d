package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.kpemu.boot.BootOutcome;
import dev.kpemu.boot.BootRunner;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.HostFiles;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.RecordedKernels;
import dev.kpemu.kprobes.events.ReferenceTrace;
import dev.kpemu.machine.Arch;

/**
 * The CPU Linux finds on kpemu's machine against the one it finds on the reference machine
 * (issue 32): the first CPU's /proc/cpuinfo, the vulnerabilities files and the boot log's CPU and
 * mitigation lines, printed by {@code reference/cpu.init}, recorded under QEMU
 * ({@code guest-images/record-cpu.sh --kernel debian:SUITE@RELEASE ARCH}) and booted here on the same
 * kernel. Equal, but for the documented remainder of x86-64's default board, each for a reason:
 * <ul>
 * <li>{@code tsc}: kpemu's CPUID hides the TSC, so Linux keeps the PIT-calibrated delay loop, the
 *     PM timer and jiffies as its clocks (docs/x86-boot-notes.md, "TSC and determinism");</li>
 * <li>{@code apic}, {@code extd_apicid} and the "smpboot: CPU0" line: the default board is the
 *     8259 pair alone, QEMU's {@code pc} has a local APIC (kpemu's APIC board, {@code --cpus N},
 *     shows them).</li>
 * </ul>
 * {@code cx16} is shown: kpemu executes {@code cmpxchg16b} in its native code ({@code X86Pc.cpuPolicy}).
 * A difference outside it fails, and so does a remainder entry that no longer differs (the list
 * must shrink with the machine). arm64 has no remainder.
 */
@Tag("kernel")
class CpuModelTest {
    static final Set<String> X86_HIDDEN_FLAGS = Set.of("tsc", "apic", "extd_apicid");

    static java.util.stream.Stream<org.junit.jupiter.params.provider.Arguments> kernels() { return KernelMatrixTest.kernels(); }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("kernels")
    void theGuestSeesTheReferenceMachinesCpu(String suite, Arch arch) throws Exception {
        GuestImages images = GuestImages.forRepository();
        Map<String, String> v = images.kernelVersion(arch, RecordedKernels.choice(suite));
        Path root = KernelTraceRegressionTest.REFERENCE;
        Path recorded = root.resolve(arch.linuxName()).resolve(ReferenceTrace.series(v.get("release"))).resolve("cpu.view");
        List<String> file = Files.readAllLines(recorded);
        assertTrue(file.stream().anyMatch(l -> l.startsWith("# kernel: " + v.get("release") + " ")), "recorded on the kernel the test boots: " + file.get(0));
        List<String> linux = file.stream().filter(l -> !l.startsWith("#")).toList();

        Initramfs archive = Initramfs.defaultGuest(Files.readAllBytes(images.busybox(arch)));
        HostFiles.addExecutable(archive, root.resolve("cpu.init"), "init", arch);
        Path initrd = archive.write(Files.createTempFile("kpemu-cpu", ".cpio"));
        List<String> kpemu;
        try {
            ByteArrayOutputStream console = new ByteArrayOutputStream();
            BootRunner.Result r = BootRunner.boot(new BootRunner.Options(arch, images.kernel(arch, RecordedKernels.choice(suite)), initrd, null, 256, 60,
                    console, new PrintStream(new ByteArrayOutputStream())));
            assertEquals(BootOutcome.POWERED_OFF, r.outcome(), r.status());
            kpemu = view(console.toString(StandardCharsets.ISO_8859_1));
        } finally {
            Files.deleteIfExists(initrd);
        }
        assertTrue(kpemu.size() > 20, "the guest printed its CPU: " + kpemu);

        List<String> wrong = new ArrayList<>();
        Set<String> linuxOnly = new LinkedHashSet<>(linux), kpemuOnly = new LinkedHashSet<>(kpemu);
        linuxOnly.removeAll(kpemu);
        kpemuOnly.removeAll(linux);
        if (arch == Arch.X86_64) {
            String lf = field(linux, "cpuinfo flags"), kf = field(kpemu, "cpuinfo flags");
            Set<String> missing = new TreeSet<>(Arrays.asList(lf.split(" "))), extra = new TreeSet<>(Arrays.asList(kf.split(" ")));
            missing.removeAll(Arrays.asList(kf.split(" ")));
            extra.removeAll(Arrays.asList(lf.split(" ")));
            assertEquals(new TreeSet<>(X86_HIDDEN_FLAGS), missing, "the flags kpemu's CPU does not show are the documented ones");
            assertTrue(extra.isEmpty(), "flags QEMU's CPU does not show: " + extra);
            linuxOnly.removeIf(l -> l.startsWith("cpuinfo flags") || l.startsWith("boot smpboot: CPU0: "));
            kpemuOnly.removeIf(l -> l.startsWith("cpuinfo flags"));
        }
        linuxOnly.forEach(l -> wrong.add("only under QEMU: " + l));
        kpemuOnly.forEach(l -> wrong.add("only under kpemu: " + l));
        assertTrue(wrong.isEmpty(), suite + " " + arch + ":\n" + String.join("\n", wrong));
    }

    /** The lines between the init's markers, as record-cpu.sh keeps them. */
    static List<String> view(String console) {
        List<String> out = new ArrayList<>();
        boolean in = false;
        for (String l : console.replace("\r", "").split("\n")) {
            if (l.startsWith("KPEMU-CPU-BEGIN")) in = true;
            else if (l.startsWith("KPEMU-CPU-END")) in = false;
            else if (in && !l.matches("^cpuinfo (bogomips|BogoMIPS|cpu MHz)\\s*:.*")) out.add(l);
        }
        return out;
    }

    private static String field(List<String> view, String name) {
        return view.stream().filter(l -> l.startsWith(name)).map(l -> l.substring(l.indexOf(':') + 1).strip()).findFirst().orElse("");
    }
}
