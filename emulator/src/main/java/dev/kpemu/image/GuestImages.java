package dev.kpemu.image;

import dev.kpemu.machine.Arch;
import dev.kpemu.natives.NativeLibraries;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The guest images kpemu boots: Debian's kernel and busybox fetched by
 * {@code guest-images/fetch-kernel.sh} / {@code fetch-busybox.sh} into
 * {@code <cache>/guest/<arch>/}, and the default initramfs built from them in Java.
 *
 * <p>The cache is {@code -Dkpemu.cache}, else {@code $KPEMU_CACHE}, else {@code <repo>/.cache};
 * the scripts get the same directory through {@code KPEMU_CACHE}.
 */
public final class GuestImages {
    /** Kernel, initramfs and the version file's fields, for one architecture. */
    public record Guest(Arch arch, Path kernel, Path initramfs, Map<String, String> version) {
        public String release() { return version.getOrDefault("release", "?"); }
    }

    private final Path root;
    private final Path cache;

    public GuestImages(Path repositoryRoot, Path cacheRoot) {
        this.root = repositoryRoot;
        this.cache = cacheRoot;
    }

    /** Uses the repository found by {@link NativeLibraries#repositoryRoot()} and the default cache. */
    public static GuestImages forRepository() throws KernelImageException {
        Path root = NativeLibraries.repositoryRoot();
        if (root == null || !Files.isRegularFile(root.resolve("guest-images/fetch-kernel.sh"))) {
            throw new KernelImageException("kpemu repository not found (guest-images/fetch-kernel.sh); set -Dkpemu.root");
        }
        String c = System.getProperty("kpemu.cache");
        if (c == null || c.isBlank()) c = System.getenv("KPEMU_CACHE");
        Path cache = c != null && !c.isBlank() ? Path.of(c) : root.resolve(".cache");
        return new GuestImages(root, cache.toAbsolutePath());
    }

    public Path cacheRoot() { return cache; }

    /** Debian's architecture name: {@code amd64}, {@code arm64}. */
    public static String debianName(Arch arch) { return arch == Arch.X86_64 ? "amd64" : "arm64"; }

    /** ELF e_machine of the architecture's vmlinux: EM_X86_64 (62), EM_AARCH64 (183). */
    public static int elfMachine(Arch arch) { return arch == Arch.X86_64 ? ElfImage.EM_X86_64 : ElfImage.EM_AARCH64; }

    /** {@code <cache>/guest/<arch>}. */
    public Path directory(Arch arch) { return cache.resolve("guest").resolve(arch.linuxName()); }

    /** The kernel (x86_64: bzImage; arm64: raw Image), fetched on first use. */
    public Path kernel(Arch arch) throws KernelImageException {
        Path k = directory(arch).resolve("vmlinuz");
        if (Files.isRegularFile(k) && Files.isRegularFile(directory(arch).resolve(".kernel-verified"))) return k;
        return runScript("fetch-kernel.sh", arch);
    }

    /** Debian's static busybox for the guest, fetched on first use. */
    public Path busybox(Arch arch) throws KernelImageException {
        Path b = directory(arch).resolve("busybox");
        if (Files.isRegularFile(b) && Files.isRegularFile(directory(arch).resolve(".busybox-verified"))) return b;
        return runScript("fetch-busybox.sh", arch);
    }

    /** The kernel's config file (fetched with the kernel). */
    public Path config(Arch arch) throws KernelImageException {
        kernel(arch);
        return directory(arch).resolve("config");
    }

    /** Fields of the kernel's {@code version} file (package, version, release, ...). */
    public Map<String, String> kernelVersion(Arch arch) throws KernelImageException {
        kernel(arch);
        Map<String, String> m = new LinkedHashMap<>();
        try {
            for (String line : Files.readAllLines(directory(arch).resolve("version"))) {
                int i = line.indexOf('=');
                if (i > 0) m.put(line.substring(0, i), line.substring(i + 1));
            }
        } catch (IOException e) {
            throw new KernelImageException(directory(arch).resolve("version") + ": cannot read: " + e.getMessage(), e);
        }
        return m;
    }

    /**
     * {@code initramfs.cpio} (the default guest), (re)written when missing or when its bytes differ
     * from what the current busybox and /init script give (building it takes milliseconds).
     */
    public Path initramfs(Arch arch) throws KernelImageException {
        Path out = directory(arch).resolve("initramfs.cpio");
        Path bb = busybox(arch);
        try {
            byte[] want = Initramfs.defaultGuest(Files.readAllBytes(bb)).toBytes();
            if (Files.isRegularFile(out) && Files.size(out) == want.length && java.util.Arrays.equals(Files.readAllBytes(out), want)) return out;
            return writeAtomically(out, want);
        } catch (IOException e) {
            throw new KernelImageException(out + ": cannot build the initramfs: " + e.getMessage(), e);
        }
    }

    static Path writeAtomically(Path out, byte[] bytes) throws IOException {
        Files.createDirectories(out.toAbsolutePath().getParent());
        Path tmp = Files.createTempFile(out.toAbsolutePath().getParent(), out.getFileName().toString(), ".tmp");
        try {
            Files.write(tmp, bytes);
            try {
                Files.setPosixFilePermissions(tmp, java.nio.file.attribute.PosixFilePermissions.fromString("rw-r--r--"));
            } catch (UnsupportedOperationException ignored) {
                // not a POSIX file system
            }
            Files.move(tmp, out, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        } finally {
            Files.deleteIfExists(tmp);
        }
        return out;
    }

    /** Rebuilds {@code initramfs.cpio} unconditionally. */
    public Path rebuildInitramfs(Arch arch) throws KernelImageException {
        try {
            Files.deleteIfExists(directory(arch).resolve("initramfs.cpio"));
        } catch (IOException e) {
            throw new KernelImageException(directory(arch).resolve("initramfs.cpio") + ": cannot delete: " + e.getMessage(), e);
        }
        return initramfs(arch);
    }

    /** Kernel + initramfs, fetching and building whatever is missing. */
    public Guest guest(Arch arch) throws KernelImageException {
        Path k = kernel(arch);
        Path i = initramfs(arch);
        return new Guest(arch, k, i, kernelVersion(arch));
    }

    /** x86_64 only: the bzImage payload as an ELF file {@code vmlinux} in the cache (for a PVH boot). */
    public Path vmlinux(Arch arch) throws KernelImageException {
        if (arch != Arch.X86_64) throw new KernelImageException("a separate vmlinux exists only for x86_64; the arm64 Image is loaded as is");
        Path k = kernel(arch);
        Path out = directory(arch).resolve("vmlinux");
        try {
            if (Files.isRegularFile(out) && Files.getLastModifiedTime(out).compareTo(Files.getLastModifiedTime(k)) >= 0) return out;
            return writeAtomically(out, BzImage.read(k).extractVmlinux());
        } catch (KernelImageException e) {
            throw e;
        } catch (IOException e) {
            throw new KernelImageException(out + ": cannot write: " + e.getMessage(), e);
        }
    }

    /** The kernel's symbols, decoded from its kallsyms tables. */
    public SymbolTable symbols(Arch arch) throws KernelImageException {
        if (arch == Arch.X86_64) return Kallsyms.fromElf(ElfImage.read(vmlinux(arch)));
        Path k = kernel(arch);
        return Kallsyms.fromArm64Image(KernelFiles.readArm64Image(k), k.toString());
    }

    private Path runScript(String script, Arch arch) throws KernelImageException {
        Path s = root.resolve("guest-images").resolve(script);
        if (!Files.isRegularFile(s)) throw new KernelImageException(s + ": script missing");
        try {
            ProcessBuilder pb = new ProcessBuilder("bash", s.toString(), arch.linuxName());
            pb.environment().put("KPEMU_CACHE", cache.toString());
            Path err = Files.createTempFile("kpemu-" + script, ".err");
            pb.redirectError(err.toFile());
            Process p = pb.start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            boolean done = p.waitFor(20, TimeUnit.MINUTES);
            String errText = Files.readString(err).trim();
            Files.deleteIfExists(err);
            if (!done) {
                p.destroyForcibly();
                throw new KernelImageException(script + " " + arch.linuxName() + " timed out");
            }
            if (p.exitValue() != 0) {
                String last = errText.isEmpty() ? "exit " + p.exitValue() : errText.lines().reduce((a, b) -> b).orElse("");
                throw new KernelImageException(script + " " + arch.linuxName() + " failed: " + last);
            }
            String[] lines = out.split("\n");
            Path result = Path.of(lines[lines.length - 1].trim());
            if (!Files.isRegularFile(result)) throw new KernelImageException(script + " printed " + result + ", which is not a file");
            return result;
        } catch (IOException e) {
            throw new KernelImageException("cannot run " + s + ": " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KernelImageException("interrupted while running " + script);
        }
    }

    /**
     * Prints, for each architecture given (default: both), the kernel, initramfs and version:
     * {@code java -cp ... dev.kpemu.image.GuestImages [x86_64|arm64]...}
     */
    public static void main(String[] args) throws Exception {
        GuestImages g = forRepository();
        java.util.List<Arch> arches = args.length == 0 ? java.util.List.of(Arch.values())
                : java.util.Arrays.stream(args).map(Arch::parse).toList();
        for (Arch a : arches) {
            Guest guest = g.guest(a);
            System.out.println(a.linuxName() + " kernel=" + guest.kernel() + " initramfs=" + guest.initramfs()
                    + " package=" + guest.version().get("package") + " version=" + guest.version().get("version"));
        }
    }
}
