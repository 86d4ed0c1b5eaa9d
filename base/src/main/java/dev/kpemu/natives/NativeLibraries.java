package dev.kpemu.natives;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * Finds the native engines (Unicorn, Capstone) that {@code scripts/fetch-natives.sh} puts in the
 * project-local cache, fetching them on first use when the script can be found.
 *
 * <p>Lookup order: system property {@code kpemu.natives}, environment {@code KPEMU_NATIVES},
 * {@code <kpemu.cache>/natives/lib}, then {@code .cache/natives/lib} under the repository root
 * (found from {@code kpemu.root}, by walking up from the working directory, or as the repository
 * the jar was built in: {@link #INSTALLATION}).
 */
public final class NativeLibraries {
    public static final String UNICORN = "libunicorn.so.2";
    public static final String CAPSTONE = "libcapstone.so";
    /** kpemu's own instruction clock (a Unicorn block hook in C), built by the fetch script. */
    public static final String CLOCK = "libkpemu_clock.so";

    private static volatile Path directory;

    private NativeLibraries() {}

    /** Loads a library from the natives directory into the global arena (never unloaded). */
    public static SymbolLookup load(String fileName) {
        Path lib = directory().resolve(fileName);
        if (!Files.isRegularFile(lib)) {
            throw new NativeLibraryException("native library " + lib + " is missing; run scripts/fetch-natives.sh");
        }
        return SymbolLookup.libraryLookup(lib, Arena.global());
    }

    public static synchronized Path directory() {
        if (directory != null) return directory;
        String prop = System.getProperty("kpemu.natives");
        if (prop == null || prop.isBlank()) prop = System.getenv("KPEMU_NATIVES");
        if (prop != null && !prop.isBlank() && complete(Path.of(prop))) {
            return directory = Path.of(prop);
        }
        Path root = repositoryRoot();
        Path cache = cacheDirectory(root);
        Path lib = cache.resolve("natives").resolve("lib");
        if (complete(lib)) {
            return directory = lib;
        }
        if (root == null) {
            throw new NativeLibraryException("native engines not found (set -Dkpemu.natives or run scripts/fetch-natives.sh)");
        }
        return directory = fetch(root, cache.resolve("natives"));
    }

    private static boolean complete(Path lib) {
        return Files.isRegularFile(lib.resolve(UNICORN)) && Files.isRegularFile(lib.resolve(CAPSTONE))
                && Files.isRegularFile(lib.resolve(CLOCK));
    }

    static Path cacheDirectory(Path root) {
        String c = System.getProperty("kpemu.cache");
        if (c == null || c.isBlank()) c = System.getenv("KPEMU_CACHE");
        if (c != null && !c.isBlank()) return Path.of(c);
        return (root != null ? root : Path.of(".")).resolve(".cache");
    }

    /**
     * The class-path resource the build writes ({@code root=}: the repository it was built in), so
     * that a program with only kpemu's jars (a Maven project depending on the installed
     * {@code kpemu-api}) finds the natives and guest images with no system property.
     */
    public static final String INSTALLATION = "/dev/kpemu/natives/installation.properties";

    /**
     * The repository root: {@code kpemu.root}, else the nearest ancestor of the working directory
     * holding scripts/fetch-natives.sh, else the repository the jar was built in ({@link #INSTALLATION})
     * if it still holds that script; null when none.
     */
    public static Path repositoryRoot() {
        String r = System.getProperty("kpemu.root");
        if (r != null && !r.isBlank()) return Path.of(r).toAbsolutePath();
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("scripts/fetch-natives.sh"))) return p;
        }
        return builtIn();
    }

    private static Path builtIn() {
        try (var in = NativeLibraries.class.getResourceAsStream(INSTALLATION)) {
            if (in == null) return null;
            java.util.Properties props = new java.util.Properties();
            props.load(in);
            String root = props.getProperty("root");
            if (root == null || root.isBlank() || root.contains("${")) return null;
            Path p = Path.of(root);
            return Files.isRegularFile(p.resolve("scripts/fetch-natives.sh")) ? p : null;
        } catch (IOException | java.nio.file.InvalidPathException e) {
            return null;
        }
    }

    private static Path fetch(Path root, Path cache) {
        Path script = root.resolve("scripts/fetch-natives.sh");
        try {
            Process p = new ProcessBuilder("bash", script.toString(), cache.toString())
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            if (!p.waitFor(15, TimeUnit.MINUTES) || p.exitValue() != 0) {
                throw new NativeLibraryException("scripts/fetch-natives.sh failed (exit " + p.exitValue() + ")");
            }
            String[] lines = out.split("\n");
            return Path.of(lines[lines.length - 1].trim());
        } catch (IOException e) {
            throw new NativeLibraryException("cannot run " + script + ": " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new NativeLibraryException("interrupted while fetching native engines");
        }
    }

    /** A native engine could not be found or loaded. */
    public static final class NativeLibraryException extends RuntimeException {
        public NativeLibraryException(String message) { super(message); }
    }
}
