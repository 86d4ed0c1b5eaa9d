package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;

/**
 * The tables kpemu reads from Debian's kernel file equal the lists Linux itself shows for them
 * after boot under QEMU (guest-images/record-kernel-lists.sh): debugfs {@code kprobes/blacklist}
 * range for range, and tracefs {@code available_filter_functions} (the functions with an ftrace
 * site outside the init text, which the kernel frees) name for name, by count and digest.
 */
@Tag("kernel")
public class KernelTextTablesTest {
    /** {@code guest-images/reference/ARCH/SERIES} (series: major.minor of the release, as the recording scripts name it). */
    static Path reference(Arch a, String release) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("^(\\d+\\.\\d+)").matcher(release);
        Assumptions.assumeTrue(m.find(), "no series in release " + release);
        return NativeLibraries.repositoryRoot().resolve("guest-images/reference").resolve(a.linuxName()).resolve(m.group(1));
    }

    /** Reads a recorded list; skips the test when none was recorded for this build of the cached kernel. */
    static List<String> recorded(Arch a, String name, Map<String, String> version) throws Exception {
        Path file = reference(a, version.get("release")).resolve(name);
        Assumptions.assumeTrue(Files.isRegularFile(file), "no " + name + " recorded for " + version.get("release") + " (guest-images/record-kernel-lists.sh)");
        List<String> lines = Files.readAllLines(file);
        String kernel = lines.stream().filter(l -> l.startsWith("# kernel: ")).findFirst().orElse("# kernel: ?").substring(10).split(" ")[0];
        Assumptions.assumeTrue(kernel.equals(version.get("release")), name + " was recorded on " + kernel + ", the cached kernel is " + version.get("release"));
        return lines.stream().filter(l -> !l.startsWith("#")).toList();
    }


    @ParameterizedTest
    @EnumSource(Arch.class)
    void blacklistEqualsDebugfs(Arch a) throws Exception {
        GuestImages images = GuestImages.forRepository();
        blacklistEqualsDebugfs(a, images.kernel(a), images.kernelVersion(a));
    }

    /** The check for one kernel file (skipped when no list was recorded for its release). */
    public static void blacklistEqualsDebugfs(Arch a, Path kernel, Map<String, String> version) throws Exception {
        List<String> linux = recorded(a, "kprobe_blacklist", version);
        Kallsyms.KernelText k = Kallsyms.load(kernel);
        KernelTextTables t = KernelTextTables.read(a, k.symbols(), k.bytes());
        Set<String> kpemu = t.kprobeBlacklist().stream()
                .map(r -> String.format("0x%016x-0x%016x\t%s", r.start(), r.end(), r.name())).collect(Collectors.toCollection(TreeSet::new));
        Set<String> want = new TreeSet<>(linux);
        Set<String> missing = new TreeSet<>(want), extra = new TreeSet<>(kpemu);
        missing.removeAll(kpemu);
        extra.removeAll(want);
        assertTrue(missing.isEmpty() && extra.isEmpty(), a + ": " + t.notes() + "\nLinux lists, kpemu does not (" + missing.size() + "):\n"
                + String.join("\n", first(missing)) + "\nkpemu lists, Linux does not (" + extra.size() + "):\n" + String.join("\n", first(extra)));
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void ftraceSitesEqualAvailableFilterFunctions(Arch a) throws Exception {
        GuestImages images = GuestImages.forRepository();
        ftraceSitesEqualAvailableFilterFunctions(a, images.kernel(a), images.kernelVersion(a));
    }

    /** The check for one kernel file (skipped when no digest was recorded for its release). */
    public static void ftraceSitesEqualAvailableFilterFunctions(Arch a, Path kernel, Map<String, String> version) throws Exception {
        GuestImages images = GuestImages.forRepository();
        List<String> digest = recorded(a, "available_filter_functions.digest", version);
        Kallsyms.KernelText k = Kallsyms.load(kernel);
        KernelTextTables t = KernelTextTables.read(a, k.symbols(), k.bytes());
        KernelTextTables.Range init = t.section("_sinittext", "_einittext").orElseThrow();
        List<String> names = new ArrayList<>();
        for (long site : t.ftraceSites()) {
            if (init.contains(site)) continue;   // freed after boot
            k.symbols().lookup(site).ifPresent(s -> names.add(ftraceName(a, k, s, site)));
        }
        Set<String> unique = new TreeSet<>(names);
        StringBuilder sb = new StringBuilder();
        for (String n : unique) sb.append(n).append('\n');
        String sha = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(sb.toString().getBytes(StandardCharsets.UTF_8)));
        Path full = images.cacheRoot().resolve("reference").resolve(a.linuxName())
                .resolve(reference(a, version.get("release")).getFileName()).resolve("available_filter_functions");
        String hint = "";
        if (Files.isRegularFile(full)) {
            Set<String> linux = new TreeSet<>(Files.readAllLines(full));
            Set<String> missing = new TreeSet<>(linux), extra = new TreeSet<>(unique);
            missing.removeAll(unique);
            extra.removeAll(linux);
            hint = "\nLinux traces, kpemu finds no site (" + missing.size() + "): " + first(missing) + "\nkpemu finds a site, Linux does not trace ("
                    + extra.size() + "): " + first(extra);
        }
        assertEquals("lines=" + names.size(), digest.stream().filter(l -> l.startsWith("lines=")).findFirst().orElseThrow(), a + ": " + t.notes() + hint);
        assertEquals("unique-names-sha256=" + sha, digest.stream().filter(l -> l.startsWith("unique-names-sha256=")).findFirst().orElseThrow(), a + hint);
    }

    /**
     * How ftrace names a record: its function, or on x86, when the record is further into the
     * symbol than a call at the entry can be (an overridden weak function's leftover code),
     * {@code __ftrace_invalid_address___<offset>} (FTRACE_MCOUNT_MAX_OFFSET: the landing pad's
     * length on IBT kernels, else 0).
     */
    static String ftraceName(Arch a, Kallsyms.KernelText k, Symbol s, long site) {
        long offset = site - s.address();
        if (a != Arch.X86_64 || offset == 0) return s.name();
        int o = (int) k.symbols().fileOffset(s.address()).orElse(-1);
        boolean pad = o >= 0 && (k.bytes()[o] & 0xff) == 0xf3 && (k.bytes()[o + 1] & 0xff) == 0x0f && (k.bytes()[o + 2] & 0xff) == 0x1e;
        return pad && offset == 4 ? s.name() : "__ftrace_invalid_address___" + offset;
    }

    private static List<String> first(Set<String> s) { return s.stream().limit(20).toList(); }
}
