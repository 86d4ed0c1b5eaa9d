package dev.kpemu.image;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * SHA-256 digests of files (kernel images, initramfs, kpemu's own jar) remembered by the file's
 * path, size, modification time and file key (the inode), in this process and, given a folder, in
 * a small file per digest there — as make and the launcher's build check trust modification
 * times. A boot hashes the same large files every run (a snapshot's identity names the kernel
 * and initramfs by digest; the x86 vmlinux cache by the bzImage's), and hashing is slow at start:
 * SHA-256 runs as plain Java until C2 compiles it (its intrinsic is C2's; the launcher runs C1
 * only): measured 290 ms for 8 MiB with C1, 565 ms for the first 8 MiB with C2, about a quarter
 * of a snapshot-started session's Java time.
 */
public final class FileDigests {
    private static final Map<String, String> REMEMBERED = new ConcurrentHashMap<>();

    private FileDigests() {}

    /** The file's SHA-256 in lower-case hex; {@code cacheDir} (may be null): where digests are kept between runs. */
    public static String sha256(Path file, Path cacheDir) throws IOException {
        BasicFileAttributes a = Files.readAttributes(file, BasicFileAttributes.class);
        String key = file.toAbsolutePath().normalize() + "\n" + a.size() + "\n" + a.lastModifiedTime().toMillis() + "\n" + a.fileKey();
        String hex = REMEMBERED.get(key);
        if (hex != null) return hex;
        Path kept = cacheDir == null ? null : cacheDir.resolve(sha256Hex(key.getBytes(StandardCharsets.UTF_8)) + ".sha256");
        if (kept != null) {
            try {
                String s = Files.readString(kept, StandardCharsets.US_ASCII).strip();
                if (s.length() == 64 && s.chars().allMatch(c -> Character.digit(c, 16) >= 0)) hex = s;
            } catch (IOException e) {
                // not kept yet, or unreadable: hash the file
            }
        }
        if (hex == null) {
            hex = hash(file);
            if (kept != null) keep(kept, hex);
        }
        REMEMBERED.put(key, hex);
        return hex;
    }

    /** SHA-256 of bytes, in lower-case hex. */
    public static String sha256Hex(byte[] data) { return HexFormat.of().formatHex(sha256().digest(data)); }

    private static String hash(Path file) throws IOException {
        MessageDigest md = sha256();
        try (InputStream in = Files.newInputStream(file)) {
            byte[] buf = new byte[1 << 16];
            for (int n; (n = in.read(buf)) > 0; ) md.update(buf, 0, n);
        }
        return HexFormat.of().formatHex(md.digest());
    }

    private static void keep(Path kept, String hex) {
        try {
            Files.createDirectories(kept.getParent());
            Path tmp = Files.createTempFile(kept.getParent(), "digest-", ".tmp");
            Files.writeString(tmp, hex + "\n", StandardCharsets.US_ASCII);
            Files.move(tmp, kept, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            // an unwritable folder only costs time
        }
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
