package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Every recorded reference names the build {@code guest-images/reference/kernels} gives for its
 * suite: a series directory (reference/ARCH/SERIES) holds one build's recordings, and the
 * tests boot that build.
 */
class RecordedKernelsTest {
    static final Pattern KERNEL = Pattern.compile("^# kernel: (\\S+)", Pattern.MULTILINE);
    static final Pattern SUITE = Pattern.compile("^# suite: (\\S+)", Pattern.MULTILINE);

    @Test
    void everyRecordingNamesTheSuitesRecordedBuild() throws Exception {
        Map<String, String> releases = RecordedKernels.releases();
        assertTrue(releases.keySet().containsAll(List.of("bookworm", "trixie", "sid")), releases.toString());
        Path reference = RecordedKernels.file().getParent();
        List<String> wrong = new ArrayList<>();
        int checked = 0;
        for (String arch : List.of("x86_64", "arm64")) {
            String suffix = arch.equals("x86_64") ? "-amd64" : "-arm64";
            try (Stream<Path> files = Files.walk(reference.resolve(arch))) {
                for (Path f : files.filter(Files::isRegularFile).toList()) {
                    String head = readHead(f);
                    Matcher k = KERNEL.matcher(head);
                    if (!k.find()) continue;
                    String release = k.group(1);
                    Path rel = reference.resolve(arch).relativize(f);
                    // the series directory is the build's major.minor
                    if (rel.getNameCount() > 1 && !release.startsWith(rel.getName(0) + ".")) {
                        wrong.add(rel + ": " + release + " is not series " + rel.getName(0));
                    }
                    // with "# suite:", that suite's build; without (older recordings), some suite's build
                    // (a cloud flavour is the same build)
                    Matcher s = SUITE.matcher(head);
                    List<String> builds = s.find() ? List.of(releases.getOrDefault(KernelChoice.normalize(s.group(1)), "?"))
                            : List.copyOf(releases.values());
                    if (builds.stream().noneMatch(b -> release.equals(b + suffix) || release.equals(b + "-cloud" + suffix))) {
                        wrong.add(arch + "/" + rel + ": recorded on " + release + ", but reference/kernels names " + builds);
                    }
                    checked++;
                }
            }
        }
        assertTrue(wrong.isEmpty(), String.join("\n", wrong));
        assertTrue(checked > 100, "the recordings were found: " + checked);
    }

    @Test
    void choicesNameTheRecordedBuild() {
        assertEquals(new KernelChoice.Debian("trixie", RecordedKernels.releases().get("trixie")), RecordedKernels.choice("trixie"));
        assertEquals("sid", RecordedKernels.choice("unstable").suite());
    }

    /**
     * {@code ./kpemu test} pins the default kernel ({@code debian} alone, what most tests boot) to
     * the machine's suite's recorded build through {@code $KPEMU_KERNEL}.
     */
    @Test
    void theTestRunsDefaultKernelIsTheRecordedBuild() {
        String host = GuestImages.hostSuite();
        org.junit.jupiter.api.Assumptions.assumeTrue(RecordedKernels.releases().containsKey(host),
                "the machine's suite " + host + " has no recorded build");
        assertEquals(RecordedKernels.choice(host), GuestImages.effective(KernelChoice.DEFAULT),
                "KPEMU_KERNEL=" + System.getenv("KPEMU_KERNEL") + " (run the tests with ./kpemu test)");
        assertEquals(Path.of("/c/guest/" + host + "@" + RecordedKernels.releases().get(host) + "/arm64"),
                new GuestImages(Path.of("/r"), Path.of("/c")).kernelDirectory(dev.kpemu.machine.Arch.ARM64, KernelChoice.DEFAULT));
        assertEquals(new KernelChoice.Debian("sid"), GuestImages.effective(new KernelChoice.Debian("sid")), "a named suite is not replaced");
    }

    static String readHead(Path f) throws java.io.IOException {
        try (var in = Files.newInputStream(f)) {
            return new String(in.readNBytes(2048), java.nio.charset.StandardCharsets.ISO_8859_1);
        }
    }
}
