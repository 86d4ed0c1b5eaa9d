package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;

/**
 * kpemu's decoded symbols against Linux's own /proc/kallsyms, as recorded under QEMU by
 * guest-images/record-kallsyms.sh (guest-images/reference/ARCH/kallsyms-RELEASE.txt).
 *
 * <p>Compared: every line of /proc/kallsyms without a {@code [module]} column, as
 * {@code "%016x %c %s"}: the count, the sha256 of the lines sorted bytewise, and the recorded
 * sample lines. The {@code [...]} lines (modules, bpf, ftrace trampolines) are not in the image's
 * tables; the recording lists how many there were ({@code excluded} lines).
 *
 * <p>An unstripped vmlinux is compared twice: as read ({@code .symtab}) and through its kallsyms
 * tables alone.
 *
 * <p>Kernels: the ones in the guest cache ({@code <cache>/guest/<arch>/vmlinux} and
 * {@code vmlinuz}) plus any files named in the system property {@code kpemu.kallsyms.kernels}
 * (path-separator separated). A kernel whose release has no recording is skipped with a note;
 * a recording with no kernel present is not tested.
 */
@Tag("kernel")
public class KallsymsReferenceTest {
    static final Path REFERENCE = Path.of(System.getProperty("user.dir")).resolveSibling("guest-images").resolve("reference");

    record Reference(String release, int coreLines, String coreSortedSha256, List<String> samples) {
        static Reference read(Path file) throws IOException {
            String release = null, sha = null;
            int core = -1;
            List<String> samples = new ArrayList<>();
            for (String line : Files.readAllLines(file, StandardCharsets.ISO_8859_1)) {
                if (line.startsWith("release ")) release = line.substring(8);
                else if (line.startsWith("core-lines ")) core = Integer.parseInt(line.substring(11));
                else if (line.startsWith("core-sorted-sha256 ")) sha = line.substring(19);
                else if (line.startsWith("sample ")) samples.add(line.substring(7));
            }
            assertNotNull(release, file + ": no release");
            assertNotNull(sha, file + ": no core-sorted-sha256");
            return new Reference(release, core, sha, samples);
        }
    }

    static List<Path> kernels() {
        Set<Path> out = new LinkedHashSet<>();
        String cache = System.getenv("KPEMU_CACHE");
        Path root = cache != null && !cache.isEmpty() ? Path.of(cache) : Path.of(System.getProperty("user.dir")).resolveSibling(".cache");
        // every cached kernel: guest/<suite>/<arch>/ (the matrix test fetches the other suites)
        List<Path> dirs = new ArrayList<>();
        try (Stream<Path> suites = Files.isDirectory(root.resolve("guest")) ? Files.list(root.resolve("guest")) : Stream.empty()) {
            for (Path suite : suites.sorted().toList()) for (String arch : List.of("x86_64", "arm64")) dirs.add(suite.resolve(arch));
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        for (Path dir : dirs) {
            Path vmlinux = dir.resolve("vmlinux");
            if (Files.isRegularFile(vmlinux) && !Files.isSymbolicLink(dir.resolve("vmlinuz"))) out.add(vmlinux);
            else if (dir.getFileName().toString().equals("arm64") && Files.isRegularFile(dir.resolve("vmlinuz")) && !Files.isSymbolicLink(dir.resolve("vmlinuz"))) out.add(dir.resolve("vmlinuz"));
        }
        String extra = System.getProperty("kpemu.kallsyms.kernels", "");
        for (String p : extra.split(java.io.File.pathSeparator)) if (!p.isBlank()) out.add(Path.of(p));
        return new ArrayList<>(out);
    }

    @TestFactory
    Stream<DynamicTest> symbolsEqualLinuxProcKallsyms() {
        return kernels().stream().map(k -> DynamicTest.dynamicTest(k.toString(), () -> compare(k)));
    }

    /** Compares one kernel file (x86_64 vmlinux or arm64 Image) with its recording; skips it when none exists. */
    public static void compare(Path kernel) throws Exception {
        byte[] bytes = Files.readAllBytes(kernel);
        String release = KernelRelease.of(bytes).orElseThrow(() -> new AssertionError(kernel + ": no 'Linux version' banner"));
        String arch = ImageFiles.isArm64Image(bytes) || (ImageFiles.isElf(bytes) && (bytes[18] & 0xff) == ElfImage.EM_AARCH64) ? "arm64" : "x86_64";
        Path refFile = REFERENCE.resolve(arch).resolve("kallsyms-" + release + ".txt");
        org.junit.jupiter.api.Assumptions.assumeTrue(Files.isRegularFile(refFile),
                "no recording for " + release + " (run guest-images/record-kallsyms.sh " + arch + " <kernel>)");
        compare(kernel, refFile);
    }

    /**
     * Compares one kernel file (x86_64 vmlinux or arm64 Image) with the given recording
     * ({@code record-kallsyms.sh --out}, e.g. of a kernel built on this machine); their releases must be equal.
     * A bzImage is read through its decompressed payload (the vmlinux kpemu boots).
     */
    public static void compare(Path kernel, Path refFile) throws Exception {
        byte[] bytes = Files.readAllBytes(kernel);
        if (ImageFiles.isBzImage(bytes)) bytes = Kallsyms.load(kernel).bytes();
        String release = KernelRelease.of(bytes).orElseThrow(() -> new AssertionError(kernel + ": no 'Linux version' banner"));
        Reference ref = Reference.read(refFile);
        assertEquals(ref.release, release, refFile + " records another kernel");
        compare(kernel, release, ref, Kallsyms.read(kernel));
        if (ImageFiles.isElf(bytes)) {
            ElfImage elf = ElfImage.parse(bytes, kernel.toString());
            if (!elf.symbols().isEmpty()) compare(kernel, release, ref, Kallsyms.fromElfTables(elf));   // both readings of an unstripped vmlinux
        }
    }

    static void compare(Path kernel, String release, Reference ref, SymbolTable t) throws Exception {
        List<String> lines = new ArrayList<>(t.size());
        for (Symbol s : t.symbols()) lines.add(s.toString());
        List<String> kernelOrder = List.copyOf(lines);
        lines.sort(null);   // bytewise: the names are ASCII
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        for (String l : lines) sha.update((l + "\n").getBytes(StandardCharsets.ISO_8859_1));
        String digest = HexFormat.of().formatHex(sha.digest());
        Set<String> present = new java.util.HashSet<>(kernelOrder);
        List<String> missing = ref.samples.stream().filter(s -> !present.contains(s)).toList();
        System.out.printf("%s (%s): kpemu %d symbols from %s, /proc/kallsyms %d core lines; sha256 %s; %d of %d samples missing%n",
                kernel, release, t.size(), t.source().endsWith("(.symtab)") ? ".symtab" : "kallsyms tables", ref.coreLines, digest.equals(ref.coreSortedSha256) ? "equal" : "DIFFERS",
                missing.size(), ref.samples.size());
        assertEquals(List.of(), missing.stream().limit(10).toList(), "sampled /proc/kallsyms lines kpemu lacks");
        assertEquals(ref.coreLines, t.size(), "symbol count");
        assertEquals(ref.coreSortedSha256, digest, "sha256 of the sorted \"addr type name\" lines");
    }
}
