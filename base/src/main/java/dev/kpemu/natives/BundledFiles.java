package dev.kpemu.natives;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Files that kpemu's jars carry as class-path resources (the native engines, the guest fetch
 * scripts), unpacked once into a directory of the user's cache: written beside it, each checked
 * against its SHA-256, then moved into place whole, so a directory that exists is complete (a
 * crash or a second process unpacking at the same time leaves no half-written one).
 */
public final class BundledFiles {
    /** The file an unpacked directory holds last: its presence says the unpack finished. */
    static final String COMPLETE = ".complete";

    private BundledFiles() {}

    /** The SHA-256 of {@code bytes}, as lower-case hex. */
    public static String sha256(byte[] bytes) {
        return HexFormat.of().formatHex(digest().digest(bytes));
    }

    /**
     * {@code resourceDir/NAME} for each name of {@code sha256ByName} unpacked into {@code target}
     * (made if missing), each checked against its SHA-256; {@code executable} names get the
     * execute bit. Returns {@code target}. {@code notice} is told once when files are written.
     */
    public static Path unpack(String resourceDir, Map<String, String> sha256ByName, Path target,
                              java.util.Set<String> executable, java.util.function.Consumer<String> notice) {
        if (Files.isRegularFile(target.resolve(COMPLETE))) return target;
        Path parent = target.toAbsolutePath().getParent();
        Path tmp = null;
        try {
            Files.createDirectories(parent);
            tmp = Files.createTempDirectory(parent, target.getFileName() + ".unpacking-");
            notice.accept("kpemu: unpacking " + String.join(", ", sha256ByName.keySet()) + " into " + target);
            for (Map.Entry<String, String> e : sha256ByName.entrySet()) {
                String name = e.getKey();
                MessageDigest md = digest();
                try (InputStream in = resource(resourceDir + name);
                     OutputStream out = Files.newOutputStream(tmp.resolve(name))) {
                    byte[] buf = new byte[1 << 16];
                    for (int n; (n = in.read(buf)) > 0; ) {
                        md.update(buf, 0, n);
                        out.write(buf, 0, n);
                    }
                }
                String got = HexFormat.of().formatHex(md.digest());
                if (!got.equalsIgnoreCase(e.getValue())) {
                    throw new NativeLibraries.NativeLibraryException("the bundled " + name + " has SHA-256 " + got
                            + ", not the " + e.getValue() + " recorded when kpemu was built: the jar is corrupt");
                }
                if (executable.contains(name)) tmp.resolve(name).toFile().setExecutable(true, false);
            }
            Files.writeString(tmp.resolve(COMPLETE), "");
            try {
                Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
            } catch (FileAlreadyExistsException | DirectoryNotEmptyException | AtomicMoveNotSupportedException e) {
                // another process finished first (its directory is complete) or left a broken one
                if (!Files.isRegularFile(target.resolve(COMPLETE))) {
                    deleteTree(target);
                    Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
                }
            }
            return target;
        } catch (IOException e) {
            throw new NativeLibraries.NativeLibraryException("cannot unpack kpemu's bundled files into " + target + ": " + e.getMessage());
        } finally {
            if (tmp != null) deleteTree(tmp);
        }
    }

    /** A resource's bytes, or null when the jars do not carry it. */
    public static byte[] read(String resource) {
        try (InputStream in = BundledFiles.class.getResourceAsStream(resource)) {
            return in == null ? null : in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** {@code sha256sum}'s output ("HASH  NAME" lines) as name to hash, in order. */
    static Map<String, String> parseSums(String text) {
        Map<String, String> m = new LinkedHashMap<>();
        for (String line : text.split("\n")) {
            String[] f = line.strip().split("\\s+\\*?", 2);
            if (f.length == 2 && f[0].matches("[0-9a-fA-F]{64}")) m.put(f[1].strip(), f[0].toLowerCase());
        }
        return m;
    }

    private static InputStream resource(String name) throws IOException {
        InputStream in = BundledFiles.class.getResourceAsStream(name);
        if (in == null) throw new IOException("resource " + name + " is missing from kpemu's jars");
        return in;
    }

    private static MessageDigest digest() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void deleteTree(Path dir) {
        if (!Files.exists(dir)) return;
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // a leftover temporary directory beside the cache entry; the next unpack uses another name
        }
    }
}
