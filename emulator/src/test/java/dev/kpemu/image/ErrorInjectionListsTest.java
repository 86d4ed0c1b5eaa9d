package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.junit.jupiter.api.Test;

/**
 * The error-injection lists of Debian's kernels ({@code guest-images/record-error-injection.sh},
 * docs/fault-injection.md) are there for every recorded build of {@code guest-images/reference/kernels}
 * and both architectures, recorded on that very build, in the format their readers take: one
 * {@code FUNCTION ETYPE} per line, sorted bytewise, each function once, ETYPE one of Linux's
 * EI_ETYPE_* names, the system-call entries with the architecture's prefix.
 */
class ErrorInjectionListsTest {
    static final Set<String> ETYPES = Set.of("ERRNO", "ERRNO_NULL", "NULL", "TRUE", "FALSE");

    @Test
    void everyRecordedBuildHasItsListOnBothArchitectures() throws Exception {
        Path dir = RecordedKernels.file().getParent().resolve("error-injection");
        List<String> wrong = new ArrayList<>();
        int lists = 0;
        for (Map.Entry<String, String> build : RecordedKernels.releases().entrySet()) {
            String suite = build.getKey(), release = build.getValue();
            String series = release.replaceFirst("^(\\d+\\.\\d+).*", "$1");
            for (String arch : List.of("x86_64", "arm64")) {
                Path list = dir.resolve(arch).resolve(series + ".list");
                if (!Files.isRegularFile(list)) { wrong.add(list + " is missing"); continue; }
                List<String> lines = Files.readAllLines(list);
                String recordedBy = "# Recorded by: guest-images/record-error-injection.sh " + arch + " debian:" + suite + "@" + release;
                if (!lines.contains(recordedBy)) wrong.add(list + ": no '" + recordedBy + "'");
                String prefix = arch.equals("x86_64") ? "__x64_sys_" : "__arm64_sys_";
                String previous = "";
                int functions = 0;
                for (String l : lines) {
                    if (l.startsWith("#")) continue;
                    String[] f = l.split(" ");
                    if (f.length != 2 || !ETYPES.contains(f[1])) { wrong.add(list + ": bad line '" + l + "'"); continue; }
                    if (f[0].compareTo(previous) <= 0) wrong.add(list + ": " + f[0] + " after " + previous + " (sorted, once each)");
                    if (f[0].matches("__(x64|ia32|arm64)_(compat_)?sys_.*") && !f[1].equals("ERRNO")) wrong.add(list + ": " + l + " (system calls fail with an errno)");
                    if (f[0].matches("__(x64|ia32|arm64)_.*sys_.*") && !f[0].startsWith(arch.equals("x86_64") ? "__x64_" : "__arm64_")
                            && !(arch.equals("x86_64") && f[0].startsWith("__ia32_"))) wrong.add(list + ": " + f[0] + " is another architecture's entry");
                    previous = f[0];
                    functions++;
                }
                if (!lines.contains(prefix + "openat ERRNO")) wrong.add(list + ": no " + prefix + "openat ERRNO");
                if (functions < 400) wrong.add(list + ": only " + functions + " functions");
                lists++;
            }
        }
        assertTrue(wrong.isEmpty(), String.join("\n", wrong));
        assertEquals(2 * RecordedKernels.releases().size(), lists);
    }
}
