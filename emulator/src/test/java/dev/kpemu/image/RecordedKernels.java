package dev.kpemu.image;

import dev.kpemu.natives.NativeLibraries;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The Debian kernel build each suite's references were recorded on
 * ({@code guest-images/reference/kernels}): the tests boot that build, not the suite's newest, so
 * that what Linux printed under QEMU and what kpemu prints come from the same kernel.
 */
public final class RecordedKernels {
    private RecordedKernels() {}

    /** {@code guest-images/reference/kernels} of this repository. */
    public static Path file() {
        Path root = NativeLibraries.repositoryRoot();
        if (root == null) throw new IllegalStateException("kpemu repository not found; set -Dkpemu.root");
        return root.resolve("guest-images/reference/kernels");
    }

    /** Suite to release (without the architecture suffix), in the file's order. */
    public static Map<String, String> releases() {
        Map<String, String> m = new LinkedHashMap<>();
        try {
            for (String line : Files.readAllLines(file())) {
                String l = line.strip();
                if (l.isEmpty() || l.startsWith("#")) continue;
                String[] f = l.split("\\s+");
                if (f.length != 2) throw new IllegalStateException(file() + ": bad line '" + line + "' (SUITE RELEASE)");
                m.put(KernelChoice.normalize(f[0]), f[1]);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return m;
    }

    /** The build the references of {@code suite} were recorded on: {@code debian:SUITE@RELEASE}. */
    public static KernelChoice.Debian choice(String suite) {
        String s = KernelChoice.normalize(suite);
        String r = releases().get(s);
        if (r == null) throw new IllegalStateException(file() + " names no recorded build for Debian " + s);
        return new KernelChoice.Debian(s, r);
    }
}
