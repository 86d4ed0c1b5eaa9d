package dev.kpemu.boot;

import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.stream.Stream;

import dev.kpemu.image.FileDigests;
import dev.kpemu.machine.snapshot.MachineSnapshot;
import dev.kpemu.unicorn.Unicorn;

/**
 * A boot that starts from a machine snapshot taken at {@value #AT} (after the kernel's boot-time
 * text patching, where {@code --from-init} registers probes), or boots cold and takes it there.
 * Either a given file (restored when it exists, a refusal is an error) or an automatic cache of
 * files named by the boot's identity: the kernel file, the initramfs, the command line, the
 * memory size, the machine (a command terminal or not) and the kpemu build, with the Unicorn
 * version ({@link #identity}); a cached snapshot that cannot be restored is reported in one line
 * and the boot falls back to a cold boot, which saves a new one.
 *
 * <p>The point is {@value #AT} unless {@link #atGuestTime} names another: a guest time, where an
 * event on the guest clock ends the run between engine slices (the first safe point at or after
 * it), which must come before any probe is attached; a restore from such a snapshot continues
 * from there, and the hooks' own breakpoints (the registration point) are met later as in a cold
 * boot.
 *
 * @param file the snapshot file, or null for the automatic cache
 * @param cacheDir the cache's folder (automatic)
 * @param notices where one-line notices go (saved, restored, refused)
 * @param atGuestNanos the guest time of the snapshot point, or -1 for {@value #AT}
 */
public record BootSnapshot(Path file, Path cacheDir, Consumer<String> notices, long atGuestNanos) {
    /** The snapshot point: the kernel function whose first execution runs /init. */
    public static final String AT = "run_init_process";

    public BootSnapshot {
        if ((file == null) == (cacheDir == null)) throw new IllegalArgumentException("a snapshot file or a cache folder, not both");
        if (notices == null) notices = s -> { };
        if (atGuestNanos < -1) throw new IllegalArgumentException("a snapshot's guest time cannot be negative");
    }

    public static BootSnapshot file(Path file, Consumer<String> notices) { return new BootSnapshot(file, null, notices, -1); }

    public static BootSnapshot cache(Path cacheDir, Consumer<String> notices) { return new BootSnapshot(null, cacheDir, notices, -1); }

    /** This snapshot taken at guest time {@code nanos} (the first safe point at or after it) instead of {@value #AT}. */
    public BootSnapshot atGuestTime(long nanos) {
        if (nanos < 0) throw new IllegalArgumentException("a snapshot's guest time cannot be negative");
        return new BootSnapshot(file, cacheDir, notices, nanos);
    }

    /** Whether the point is {@value #AT} (else a guest time). */
    public boolean atInit() { return atGuestNanos < 0; }

    /** The point as the identity records it: {@value #AT} or {@code guest time >= N ns}. */
    public String point() { return atInit() ? AT : "guest time >= " + atGuestNanos + " ns"; }

    public boolean automatic() { return file == null; }

    /** The file for a boot of {@code identity}: the given one, or the cache's. */
    public Path fileFor(Map<String, String> identity) {
        if (file != null) return file;
        return cacheDir.resolve(sha256Hex(String.join("\n", identity.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).toList())) + ".snapshot");
    }

    /**
     * Deletes the cache's snapshots of other kpemu builds (no build restores them), so the cache
     * holds at most one file per boot the current build has saved. Unreadable files go too.
     */
    void pruneOtherBuilds(Map<String, String> identity) {
        if (cacheDir == null) return;
        String build = identity.get("kpemu build");
        try (Stream<Path> files = Files.list(cacheDir)) {
            for (Path f : files.filter(p -> p.getFileName().toString().endsWith(".snapshot")).toList()) {
                String other;
                try {
                    other = MachineSnapshot.identity(f).get("kpemu build");
                } catch (dev.kpemu.machine.snapshot.SnapshotException e) {
                    other = null;
                }
                if (!build.equals(other)) Files.deleteIfExists(f);
            }
        } catch (IOException e) {
            notices.accept("kpemu: cannot tidy the snapshot cache " + cacheDir + ": " + e.getMessage());
        }
    }

    /** What the snapshot of a boot records about the machine, and what a restore must match. */
    public static Map<String, String> identity(BootRunner.Options o, Path kernel, byte[] initrd) throws IOException {
        return identity(o, kernel, sha256Hex(initrd), AT);
    }

    /**
     * As {@link #identity(BootRunner.Options, Path, byte[])} for this snapshot's {@link #point}; the
     * digests of the kernel and initramfs files are kept between runs ({@link FileDigests}).
     */
    public Map<String, String> identityOf(BootRunner.Options o, Path kernel, Path initrdFile) throws IOException {
        return identity(o, kernel, FileDigests.sha256(initrdFile, BootRunner.digestCacheDir()), point());
    }

    private static Map<String, String> identity(BootRunner.Options o, Path kernel, String initrdSha256, String point) throws IOException {
        Map<String, String> id = new LinkedHashMap<>();
        id.put("arch", o.arch().name());
        id.put("kernel sha256", FileDigests.sha256(kernel, BootRunner.digestCacheDir()));
        id.put("initramfs sha256", initrdSha256);
        id.put("command line", o.append() == null ? "(default)" : o.append());
        id.put("memory MiB", Integer.toString(o.memoryMiB()));
        id.put("command terminal", o.terminal() == null ? "no" : "yes");
        if (o.x86Apic() || (o.cpus() > 1 && o.arch() == dev.kpemu.machine.Arch.X86_64)) id.put("interrupt controllers", "local APIC + I/O APIC");
        // one CPU keeps the identity it always had; a machine of several is another machine, and
        // its schedule another run (MachineSnapshot's format 2 carries every vCPU)
        if (o.cpus() > 1) id.put("cpus", o.cpus() + ", schedule seed " + o.schedSeed());
        id.put("point", point);
        id.put("kpemu build", build());
        id.put("unicorn", Unicorn.version());
        // the native library decides whether the guest saw CX16 (X86Pc.cpuPolicy)
        if (o.arch() == dev.kpemu.machine.Arch.X86_64)
            id.put("x86 cmpxchg16b", dev.kpemu.machine.x86.X86Machine.nativeCmpxchg16b() ? "native hook, CX16 shown" : "CX16 hidden");
        return id;
    }

    private static String build;

    /**
     * The kpemu build: the digest of the emulator's code (its jar, or its class files when run
     * from a build folder), so a rebuilt kpemu never restores another build's snapshot.
     */
    static synchronized String build() throws IOException {
        if (build != null) return build;
        Path code;
        try {
            code = Path.of(MachineSnapshot.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        } catch (URISyntaxException | RuntimeException e) {
            throw new IOException("cannot find kpemu's own code: " + e.getMessage(), e);
        }
        MessageDigest md = sha256();
        if (Files.isRegularFile(code)) {
            build = FileDigests.sha256(code, BootRunner.digestCacheDir()).substring(0, 16);
            return build;
        } else {
            List<Path> classes;
            try (Stream<Path> s = Files.walk(code)) {
                classes = s.filter(p -> p.toString().endsWith(".class")).sorted().toList();
            }
            for (Path p : classes) {
                md.update(code.relativize(p).toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
                digest(md, p);
            }
        }
        build = HexFormat.of().formatHex(md.digest()).substring(0, 16);
        return build;
    }

    private static void digest(MessageDigest md, Path file) throws IOException {
        try (InputStream in = Files.newInputStream(file)) {
            byte[] buf = new byte[1 << 16];
            for (int n; (n = in.read(buf)) > 0; ) md.update(buf, 0, n);
        }
    }

    private static String sha256Hex(byte[] bytes) { return HexFormat.of().formatHex(sha256().digest(bytes)); }

    private static String sha256Hex(String s) { return sha256Hex(s.getBytes(java.nio.charset.StandardCharsets.UTF_8)); }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
