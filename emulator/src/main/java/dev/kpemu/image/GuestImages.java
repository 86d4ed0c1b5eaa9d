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
 * The guest images kpemu boots: Debian's kernels, fetched by suite by
 * {@code guest-images/fetch-kernel.sh} into {@code <cache>/guest/<suite>/<arch>/} (the default:
 * the machine's own suite; see {@link KernelChoice}), and busybox, fetched by
 * {@code fetch-busybox.sh} into {@code <cache>/guest/<arch>/} with the default initramfs built
 * from it in Java — one initramfs for every kernel of the architecture.
 *
 * <p>The cache is {@link NativeLibraries#cacheDirectory()} ({@code -Dkpemu.cache}, {@code $KPEMU_CACHE},
 * a checkout's {@code .cache}, else the user's cache); the scripts get the same directory through
 * {@code KPEMU_CACHE}.
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

    /**
     * Uses the repository found by {@link NativeLibraries#repositoryRoot()} and the cache
     * {@link NativeLibraries#cacheDirectory()}; without a checkout, the fetch scripts the jar
     * carries ({@link GuestScripts}), unpacked into that cache.
     */
    public static GuestImages forRepository() throws KernelImageException {
        Path root = NativeLibraries.repositoryRoot();
        Path cache = NativeLibraries.cacheDirectory(root).toAbsolutePath();
        if (root == null || !Files.isRegularFile(root.resolve("guest-images/fetch-kernel.sh"))) {
            if (!GuestScripts.bundled()) {
                throw new KernelImageException("kpemu repository not found (guest-images/fetch-kernel.sh); set -Dkpemu.root");
            }
            try {
                root = GuestScripts.unpack(cache);
            } catch (NativeLibraries.NativeLibraryException e) {
                throw new KernelImageException(e.getMessage());
            }
        }
        return new GuestImages(root, cache);
    }

    public Path cacheRoot() { return cache; }

    /** Debian's architecture name: {@code amd64}, {@code arm64}. */
    public static String debianName(Arch arch) { return arch == Arch.X86_64 ? "amd64" : "arm64"; }

    /** ELF e_machine of the architecture's vmlinux: EM_X86_64 (62), EM_AARCH64 (183). */
    public static int elfMachine(Arch arch) { return arch == Arch.X86_64 ? ElfImage.EM_X86_64 : ElfImage.EM_AARCH64; }

    /**
     * {@code <cache>/guest/<arch>}: what every kernel of the architecture shares (busybox, the
     * default initramfs), and links to the host suite's kernel (the layout before suites).
     */
    public Path directory(Arch arch) { return cache.resolve("guest").resolve(arch.linuxName()); }

    /**
     * {@code <cache>/guest/<suite>/<arch>}: one Debian suite's newest kernel, config and version
     * file; {@code <cache>/guest/<suite>@<release>/<arch>}: a build named by its release.
     */
    public Path kernelDirectory(Arch arch, KernelChoice.Debian choice) {
        choice = effective(choice);
        String key = choice.release() == null ? suite(choice) : suite(choice) + "@" + KernelChoice.withoutArch(choice.release());
        return cache.resolve("guest").resolve(key).resolve(arch.linuxName());
    }

    /** The fetch scripts' options that name a Debian choice: {@code --suite S [--release R]}. */
    private static String[] scriptOptions(KernelChoice.Debian d, String... more) {
        d = effective(d);
        java.util.List<String> o = new java.util.ArrayList<>(java.util.List.of(more));
        o.add("--suite");
        o.add(suite(d));
        if (d.release() != null) {
            o.add("--release");
            o.add(d.release());
        }
        return o.toArray(String[]::new);
    }

    /** The suite a Debian choice names, the machine's own for {@code debian} alone. */
    public static String suite(KernelChoice.Debian choice) { return effective(choice).suiteOr(hostSuite()); }

    /** The environment variable naming the Debian kernel {@code debian} alone stands for. */
    public static final String DEFAULT_KERNEL_VARIABLE = "KPEMU_KERNEL";

    /**
     * The choice itself, except {@code debian} alone (the default) when {@code $KPEMU_KERNEL}
     * names a Debian kernel ({@code debian:bookworm@6.1.0-56}, say): then that one. A CI job pins
     * the kernel its golden traces were recorded on this way; {@code ./kpemu test} pins the
     * build the repository's references were recorded on.
     */
    public static KernelChoice.Debian effective(KernelChoice.Debian choice) {
        if (choice.suite() != null || choice.release() != null) return choice;
        String v = System.getenv(DEFAULT_KERNEL_VARIABLE);
        if (v == null || v.isBlank()) return choice;
        KernelChoice c;
        try {
            c = KernelChoice.parse(v.strip());
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(DEFAULT_KERNEL_VARIABLE + ": " + e.getMessage());
        }
        if (!(c instanceof KernelChoice.Debian d)) {
            throw new IllegalArgumentException(DEFAULT_KERNEL_VARIABLE + "=" + v.strip() + ": names a file; it may name a Debian kernel only (debian:SUITE[@RELEASE])");
        }
        return d;
    }

    /** The machine's own Debian suite: VERSION_CODENAME of /etc/os-release, else bookworm (as the fetch scripts). */
    public static String hostSuite() {
        try {
            for (String line : Files.readAllLines(Path.of("/etc/os-release"))) {
                if (line.startsWith("VERSION_CODENAME=")) {
                    String v = line.substring("VERSION_CODENAME=".length()).replace("\"", "").strip();
                    if (!v.isEmpty()) return v;
                }
            }
        } catch (IOException e) {
            // not a Debian-like system: the scripts' fallback
        }
        return "bookworm";
    }

    /** The default guest's kernel (x86_64: bzImage; arm64: raw Image), fetched on first use. */
    public Path kernel(Arch arch) throws KernelImageException { return kernel(arch, KernelChoice.DEFAULT); }

    /** The chosen kernel: the file itself, or the Debian suite's kernel, fetched on first use. */
    public Path kernel(Arch arch, KernelChoice choice) throws KernelImageException {
        return switch (choice) {
            case KernelChoice.File f -> {
                if (!Files.isRegularFile(f.path())) throw new KernelImageException(f.path() + ": no such kernel file");
                yield f.path();
            }
            case KernelChoice.Debian d -> {
                Path dir = kernelDirectory(arch, d);
                Path k = dir.resolve("vmlinuz");
                if (Files.isRegularFile(k) && Files.isRegularFile(dir.resolve(".kernel-verified"))) yield k;
                yield runScript("fetch-kernel.sh", arch, scriptOptions(d));
            }
        };
    }

    /**
     * The loadable modules of the chosen Debian kernel (the same package and version, fetched on
     * first use by {@code guest-images/fetch-modules.sh}). A kernel given as a file has no
     * package to take them from.
     */
    public KernelModules modules(Arch arch, KernelChoice choice) throws KernelImageException {
        if (!(choice instanceof KernelChoice.Debian d)) {
            throw new KernelImageException("--modules needs a Debian kernel (--kernel debian[:SUITE]): its modules come from the same package");
        }
        kernel(arch, choice);
        java.util.List<String> out = runScriptOutput("fetch-modules.sh", arch, scriptOptions(d));
        if (out.isEmpty()) throw new KernelImageException("fetch-modules.sh printed no directory");
        return new KernelModules(Path.of(out.getLast()), arch);
    }

    /** Debian's static busybox for the guest (the host suite's, shared by every kernel), fetched on first use. */
    public Path busybox(Arch arch) throws KernelImageException {
        Path b = directory(arch).resolve("busybox");
        if (Files.isRegularFile(b) && Files.isRegularFile(directory(arch).resolve(".busybox-verified"))) return b;
        return runScript("fetch-busybox.sh", arch);
    }

    /** The default guest kernel's config file (fetched with the kernel). */
    public Path config(Arch arch) throws KernelImageException { return config(arch, KernelChoice.DEFAULT); }

    /**
     * A Debian kernel's config file (fetched with the kernel: {@code /boot/config-<abi>}, or
     * unstable's {@code /usr/lib/modules/<abi>/config} from {@code linux-base-<abi>}).
     */
    public Path config(Arch arch, KernelChoice.Debian choice) throws KernelImageException {
        kernel(arch, choice);
        return kernelDirectory(arch, choice).resolve("config");
    }

    /** Fields of the default kernel's {@code version} file (package, version, release, ...). */
    public Map<String, String> kernelVersion(Arch arch) throws KernelImageException { return kernelVersion(arch, KernelChoice.DEFAULT); }

    /** Fields of a Debian kernel's {@code version} file (package, version, release, suite, ...). */
    public Map<String, String> kernelVersion(Arch arch, KernelChoice.Debian choice) throws KernelImageException {
        kernel(arch, choice);
        return readVersion(kernelDirectory(arch, choice).resolve("version"));
    }

    static Map<String, String> readVersion(Path file) throws KernelImageException {
        Map<String, String> m = new LinkedHashMap<>();
        try {
            for (String line : Files.readAllLines(file)) {
                int i = line.indexOf('=');
                if (i > 0) m.put(line.substring(0, i), line.substring(i + 1));
            }
        } catch (IOException e) {
            throw new KernelImageException(file + ": cannot read: " + e.getMessage(), e);
        }
        return m;
    }

    /**
     * A Debian kernel in the cache: its suite (with {@code @release} for a build named by its
     * release), architecture, kernel file and version fields.
     */
    public record Cached(String suite, Arch arch, Path kernel, Map<String, String> version) {
        public String release() { return version.getOrDefault("release", "?"); }
    }

    /** Every verified Debian kernel in the cache, by suite then architecture; fetches nothing. */
    public java.util.List<Cached> cached() throws KernelImageException {
        java.util.List<Cached> out = new java.util.ArrayList<>();
        Path guest = cache.resolve("guest");
        if (!Files.isDirectory(guest)) return out;
        try (var suites = Files.list(guest)) {
            for (Path s : suites.sorted().toList()) {
                for (Arch a : Arch.values()) {
                    Path dir = s.resolve(a.linuxName());
                    if (Files.isSymbolicLink(s) || !Files.isRegularFile(dir.resolve(".kernel-verified"))) continue;
                    if (Files.isSymbolicLink(dir.resolve("vmlinuz")) || s.getFileName().toString().equals(a.linuxName())) continue;
                    out.add(new Cached(s.getFileName().toString(), a, dir.resolve("vmlinuz"), readVersion(dir.resolve("version"))));
                }
            }
        } catch (IOException e) {
            throw new KernelImageException(guest + ": cannot list: " + e.getMessage(), e);
        }
        return out;
    }

    /**
     * What a Debian suite resolves to on the mirror now (package, version, release, suite), with
     * private apt lists and without downloading the kernel ({@code fetch-kernel.sh --resolve}).
     */
    public Map<String, String> resolve(Arch arch, KernelChoice.Debian choice) throws KernelImageException {
        Map<String, String> m = new LinkedHashMap<>();
        for (String line : runScriptOutput("fetch-kernel.sh", arch, scriptOptions(choice, "--resolve"))) {
            int i = line.indexOf('=');
            if (i > 0) m.put(line.substring(0, i), line.substring(i + 1));
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

    /** The default guest: kernel + initramfs, fetching and building whatever is missing. */
    public Guest guest(Arch arch) throws KernelImageException { return guest(arch, KernelChoice.DEFAULT); }

    /**
     * The chosen kernel with the default initramfs (the same for every kernel). A file's version
     * fields are {@code file=} only: kpemu reads no release out of a kernel file here.
     */
    public Guest guest(Arch arch, KernelChoice choice) throws KernelImageException {
        Path k = kernel(arch, choice);
        Path i = initramfs(arch);
        Map<String, String> v = choice instanceof KernelChoice.Debian d ? kernelVersion(arch, d) : Map.of("file", k.toString());
        return new Guest(arch, k, i, v);
    }

    /** x86_64 only: the default kernel's bzImage payload as an ELF file {@code vmlinux} in the cache (for a PVH boot). */
    public Path vmlinux(Arch arch) throws KernelImageException { return vmlinux(arch, KernelChoice.DEFAULT); }

    /** x86_64 only: a Debian kernel's bzImage payload as {@code <cache>/guest/<suite>/x86_64/vmlinux}. */
    public Path vmlinux(Arch arch, KernelChoice.Debian choice) throws KernelImageException {
        if (arch != Arch.X86_64) throw new KernelImageException("a separate vmlinux exists only for x86_64; the arm64 Image is loaded as is");
        Path k = kernel(arch, choice);
        Path out = kernelDirectory(arch, choice).resolve("vmlinux");
        try {
            if (Files.isRegularFile(out) && Files.getLastModifiedTime(out).compareTo(Files.getLastModifiedTime(k)) >= 0) return out;
            return writeAtomically(out, BzImage.read(k).extractVmlinux());
        } catch (KernelImageException e) {
            throw e;
        } catch (IOException e) {
            throw new KernelImageException(out + ": cannot write: " + e.getMessage(), e);
        }
    }

    /** The default kernel's symbols, decoded from its kallsyms tables. */
    public SymbolTable symbols(Arch arch) throws KernelImageException { return symbols(arch, KernelChoice.DEFAULT); }

    /** A Debian kernel's symbols, decoded from its kallsyms tables. */
    public SymbolTable symbols(Arch arch, KernelChoice.Debian choice) throws KernelImageException {
        if (arch == Arch.X86_64) return Kallsyms.fromElf(ElfImage.read(vmlinux(arch, choice)));
        Path k = kernel(arch, choice);
        return Kallsyms.fromArm64Image(KernelFiles.readArm64Image(k), k.toString());
    }

    /** Runs a fetch script; its last stdout line is the path of the file it provides. */
    private Path runScript(String script, Arch arch, String... options) throws KernelImageException {
        java.util.List<String> lines = runScriptOutput(script, arch, options);
        Path result = Path.of(lines.isEmpty() ? "" : lines.getLast().trim());
        if (!Files.isRegularFile(result)) throw new KernelImageException(script + " printed " + result + ", which is not a file");
        return result;
    }

    /**
     * Runs a fetch script and returns its stdout lines. Its stderr (download progress) is passed
     * on to this process's stderr as it comes; its last line is the failure's message.
     */
    private java.util.List<String> runScriptOutput(String script, Arch arch, String... options) throws KernelImageException {
        Path s = root.resolve("guest-images").resolve(script);
        if (!Files.isRegularFile(s)) throw new KernelImageException(s + ": script missing");
        String what = script + " " + String.join(" ", options) + (options.length > 0 ? " " : "") + arch.linuxName();
        try {
            java.util.List<String> cmd = new java.util.ArrayList<>(java.util.List.of("bash", s.toString()));
            cmd.addAll(java.util.List.of(options));
            cmd.add(arch.linuxName());
            ProcessBuilder pb = new ProcessBuilder(cmd);
            pb.environment().put("KPEMU_CACHE", cache.toString());
            Process p = pb.start();
            // Each stderr line is passed on when the next one comes; the last one only on success
            // (on failure it is the exception's message: the error is printed once).
            String[] lastErr = {""};
            Thread errPump = Thread.ofPlatform().daemon().start(() -> {
                try (var r = new java.io.BufferedReader(new java.io.InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8))) {
                    for (String l; (l = r.readLine()) != null; ) {
                        if (l.isBlank()) continue;
                        if (!lastErr[0].isEmpty()) System.err.println(lastErr[0]);
                        lastErr[0] = l;
                    }
                } catch (IOException ignored) {
                    // the script went away
                }
            });
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            boolean done = p.waitFor(20, TimeUnit.MINUTES);
            if (!done) {
                p.destroyForcibly();
                throw new KernelImageException(what + " timed out");
            }
            errPump.join(5_000);
            if (p.exitValue() != 0) {
                String last = lastErr[0].isEmpty() ? "exit " + p.exitValue() : lastErr[0].replaceFirst("^fetch-[a-z]+: ", "");
                throw new KernelImageException(what + ": " + last);
            }
            if (!lastErr[0].isEmpty()) System.err.println(lastErr[0]);
            return out.isEmpty() ? java.util.List.of() : out.lines().toList();
        } catch (KernelImageException e) {
            throw e;
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
