package dev.kpemu.natives;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.foreign.SymbolLookup;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Finds the native engines (Unicorn, Capstone) that {@code scripts/fetch-natives.sh} puts in the
 * project-local cache, fetching them on first use when the script can be found.
 *
 * <p>Lookup order: system property {@code kpemu.natives}, environment {@code KPEMU_NATIVES},
 * {@code natives/lib} in the cache ({@link #cacheDirectory()}: in a checkout its {@code .cache}),
 * then the libraries this jar carries for the host arch ({@link #BUNDLED}), unpacked once into
 * {@code <cache>/natives/bundled-<hash>} and checked against the SHA-256 recorded at build time,
 * then, in a checkout, {@code scripts/fetch-natives.sh}, which also builds the cache's instruction
 * clock again when the checkout's C sources are newer than it ({@link #clockStale}).
 */
public final class NativeLibraries {
    public static final String UNICORN = "libunicorn.so.2";
    public static final String CAPSTONE = "libcapstone.so";
    /** kpemu's own instruction clock (a Unicorn block hook in C), built by the fetch script. */
    public static final String CLOCK = "libkpemu_clock.so";

    private static volatile Path directory;

    private NativeLibraries() {}

    /**
     * The value of {@code lib}'s function {@code name} of no arguments returning a {@code long} (a
     * struct's size or a field's offset the C code reports), or -1 when the library has no such
     * function (an older build) or the call fails.
     */
    public static long constant(SymbolLookup lib, String name) {
        var f = lib.find(name);
        if (f.isEmpty()) return -1;
        try {
            return (long) Linker.nativeLinker().downcallHandle(f.get(), FunctionDescriptor.of(ValueLayout.JAVA_LONG)).invokeExact();
        } catch (Throwable t) {
            return -1;
        }
    }

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
        if (complete(lib) && (root == null || !clockStale(root, lib))) {
            return directory = lib;
        }
        Map<String, String> bundled = bundledManifest();
        if (bundled != null && root == null) {
            return directory = unpackBundled(cache, bundled);
        }
        if (root == null) {
            throw new NativeLibraryException("native engines not found: kpemu's jars carry none for linux-" + hostArch()
                    + " (set -Dkpemu.natives, or build kpemu on this host)");
        }
        return directory = fetch(root, cache.resolve("natives"));
    }

    /** The class-path directory of the native engines kpemu-base carries for the host arch. */
    public static final String BUNDLED = "/dev/kpemu/natives/linux-" + hostArch() + "/";

    /** The host arch as Linux names it ({@code uname -m}): x86_64, aarch64. */
    public static String hostArch() {
        String a = System.getProperty("os.arch", "");
        return switch (a) {
            case "amd64", "x86_64" -> "x86_64";
            case "aarch64", "arm64" -> "aarch64";
            default -> a;
        };
    }

    /** The bundled libraries' SHA-256 by file name (the build's SHA256SUMS), or null when the jar carries none. */
    static Map<String, String> bundledManifest() {
        byte[] sums = BundledFiles.read(BUNDLED + "SHA256SUMS");
        if (sums == null) return null;
        Map<String, String> m = BundledFiles.parseSums(new String(sums, StandardCharsets.UTF_8));
        return m.keySet().containsAll(java.util.List.of(UNICORN, CAPSTONE, CLOCK)) ? m : null;
    }

    private static Path unpackBundled(Path cache, Map<String, String> sums) {
        // the directory is named by the libraries' hashes: another kpemu version's natives live beside
        String tag = BundledFiles.sha256(String.join("\n", sums.values()).getBytes(StandardCharsets.UTF_8)).substring(0, 16);
        Path dir = cache.resolve("natives").resolve("bundled-" + tag);
        return BundledFiles.unpack(BUNDLED, sums, dir, java.util.Set.of(), System.err::println);
    }

    /**
     * Where Unicorn and Capstone came from ({@code unicorn=2.1.4-4}, {@code capstone=5.0.7-1~deb13u1
     * (libcapstone5)}: the Debian versions the fetch script recorded), from the natives directory
     * in use or the bundled ones; empty when unknown.
     */
    public static Map<String, String> versions() {
        byte[] text = null;
        try {
            Path f = directory().resolve("versions");
            if (Files.isRegularFile(f)) text = Files.readAllBytes(f);
            else if (Files.isRegularFile(directory().resolveSibling("versions"))) text = Files.readAllBytes(directory().resolveSibling("versions"));
        } catch (IOException | RuntimeException e) {
            text = null;
        }
        if (text == null) text = BundledFiles.read(BUNDLED + "versions");
        Map<String, String> m = new java.util.LinkedHashMap<>();
        if (text == null) return m;
        for (String line : new String(text, StandardCharsets.UTF_8).split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0) m.put(line.substring(0, eq).strip(), line.substring(eq + 1).strip());
        }
        return m;
    }

    /** Where the C sources of {@link #CLOCK} are in a checkout. */
    static final String CLOCK_SOURCES = "emulator/src/main/c";

    /**
     * Whether checkout {@code root}'s C sources of {@link #CLOCK} changed after {@code lib}'s copy was
     * built (a source newer than it, the fetch script's rule): a program with only kpemu's jars finds
     * the natives of the checkout they were built in, whose hook library may be older than the jars
     * ({@code scripts/fetch-natives.sh} then builds it again).
     */
    static boolean clockStale(Path root, Path lib) {
        Path src = root.resolve(CLOCK_SOURCES);
        if (!Files.isDirectory(src)) return false;
        try (var files = Files.list(src)) {
            java.nio.file.attribute.FileTime built = Files.getLastModifiedTime(lib.resolve(CLOCK));
            return files.filter(f -> f.toString().endsWith(".c") || f.toString().endsWith(".h")).anyMatch(f -> {
                try {
                    return Files.getLastModifiedTime(f).compareTo(built) > 0;
                } catch (IOException e) {
                    return false;
                }
            });
        } catch (IOException e) {
            return false;
        }
    }

    private static boolean complete(Path lib) {
        return Files.isRegularFile(lib.resolve(UNICORN)) && Files.isRegularFile(lib.resolve(CAPSTONE))
                && Files.isRegularFile(lib.resolve(CLOCK));
    }

    /**
     * kpemu's cache (native engines unpacked, guest kernels and busybox, snapshots, indexes):
     * {@code -Dkpemu.cache} ({@code kpemu --cache DIR}), else {@code $KPEMU_CACHE}, else a
     * checkout's {@code .cache} when run from one (developers), else the user's cache:
     * {@code $XDG_CACHE_HOME/kpemu}, else {@code ~/.cache/kpemu}.
     */
    public static Path cacheDirectory() {
        return cacheDirectory(repositoryRoot());
    }

    /** As {@link #cacheDirectory()} for the checkout {@code root} (null: none). */
    public static Path cacheDirectory(Path root) {
        String c = System.getProperty("kpemu.cache");
        if (c == null || c.isBlank()) c = System.getenv("KPEMU_CACHE");
        if (c != null && !c.isBlank()) return Path.of(c).toAbsolutePath();
        if (root != null) return root.resolve(".cache");
        return userCache();
    }

    /** {@code $XDG_CACHE_HOME/kpemu} (an absolute XDG_CACHE_HOME only, as the XDG spec says), else {@code ~/.cache/kpemu}. */
    static Path userCache() {
        String xdg = System.getenv("XDG_CACHE_HOME");
        if (xdg != null && !xdg.isBlank() && Path.of(xdg).isAbsolute()) return Path.of(xdg, "kpemu");
        return Path.of(System.getProperty("user.home"), ".cache", "kpemu");
    }

    /**
     * The class-path resource the build writes ({@code root=}: the repository it was built in), so
     * that a program with only kpemu's jars (a Maven project depending on the installed
     * {@code kpemu-api}) finds the natives and guest images with no system property.
     */
    public static final String INSTALLATION = "/dev/kpemu/natives/installation.properties";

    /** {@code -Dkpemu.root=none}: no checkout, whatever the working directory (the release's bin/kpemu). */
    public static final String NO_CHECKOUT = "none";

    /**
     * The repository root: {@code kpemu.root} ({@link #NO_CHECKOUT}: none), else the nearest ancestor of the working directory
     * holding scripts/fetch-natives.sh, else the repository the jar was built in ({@link #INSTALLATION})
     * if it still holds that script; null when none.
     */
    public static Path repositoryRoot() {
        String r = System.getProperty("kpemu.root");
        if (NO_CHECKOUT.equals(r)) return null;
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
