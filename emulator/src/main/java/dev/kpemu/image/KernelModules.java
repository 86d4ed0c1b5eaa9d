package dev.kpemu.image;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import dev.kpemu.machine.Arch;

/**
 * The loadable modules of one kernel build, as Debian ships them under
 * {@code lib/modules/<release>/} ({@code guest-images/fetch-modules.sh}): finds a module by name
 * (the kernel's names: {@code -} and {@code _} are the same), resolves its dependencies from the
 * module's own {@code .modinfo} ({@code depends=}; Debian writes modules.dep only at install time)
 * and gives the files uncompressed (busybox's {@code insmod} takes a plain ELF), in load order.
 */
public final class KernelModules {
    /** One module: its name, its path below the release directory (without a compression suffix) and its ELF bytes. */
    public record Module(String name, String path, byte[] elf, List<String> depends, List<String> softPre) {}

    private static final List<String> SUFFIXES = List.of(".ko", ".ko.xz", ".ko.zst", ".ko.gz");

    private final Path directory;
    private final String release;
    private final Arch arch;
    private Map<String, Path> files;

    public KernelModules(Path releaseDirectory, Arch arch) {
        this.directory = releaseDirectory;
        this.release = releaseDirectory.getFileName().toString();
        this.arch = arch;
    }

    /** The kernel release the modules belong to ({@code uname -r}). */
    public String release() { return release; }

    /** The kernel's module name for a file or user spelling: {@code ext4}, {@code nf_tables}. */
    public static String moduleName(String s) {
        String n = s.substring(s.lastIndexOf('/') + 1);
        for (String suf : SUFFIXES) if (n.endsWith(suf)) { n = n.substring(0, n.length() - suf.length()); break; }
        return n.replace('-', '_');
    }

    /**
     * The modules named and every module they depend on, dependencies first, each once. A module
     * built into the kernel ({@code modules.builtin}) needs no file and is left out; an unknown
     * name is an error that says so.
     */
    public List<Module> resolve(List<String> names) throws KernelImageException {
        LinkedHashMap<String, Module> order = new LinkedHashMap<>();
        java.util.Set<String> builtin = builtin();
        for (String n : names) visit(moduleName(n), order, new ArrayList<>(), builtin);
        return List.copyOf(order.values());
    }

    private void visit(String name, LinkedHashMap<String, Module> order, List<String> path, java.util.Set<String> builtin)
            throws KernelImageException {
        if (order.containsKey(name) || builtin.contains(name)) return;
        if (path.contains(name)) throw new KernelImageException("module dependency cycle: " + String.join(" -> ", path) + " -> " + name);
        Path f = index().get(name);
        if (f == null) throw new KernelImageException("no module '" + name + "' for kernel " + release + " (looked in " + directory + ")");
        Module m = read(name, f);
        path.add(name);
        for (String d : m.depends()) visit(d, order, path, builtin);
        for (String d : m.softPre()) {
            // modprobe loads a soft dependency first when it can: by module name, else the
            // generic implementation of a crypto algorithm alias (ext4's "pre: crypto-crc32c" is
            // crc32c_generic; modules.alias, which says so, is written at install time)
            if (d.startsWith("crypto_")) d = d.substring("crypto_".length());
            String found = index().containsKey(d) ? d : index().containsKey(d + "_generic") ? d + "_generic" : null;
            if (found != null && !path.contains(found)) visit(found, order, path, builtin);
        }
        path.removeLast();
        order.put(name, m);
    }

    private Module read(String name, Path f) throws KernelImageException {
        byte[] raw;
        try {
            raw = Files.readAllBytes(f);
        } catch (IOException e) {
            throw new KernelImageException(f + ": cannot read: " + e.getMessage(), e);
        }
        byte[] elf = raw;
        String rel = directory.relativize(f).toString();
        if (!rel.endsWith(".ko")) {
            Compression c = Compression.detect(raw, 0);
            if (c == null) throw new KernelImageException(f + ": not an ELF module and no known compression");
            elf = c.decompress(raw, 0, raw.length, -1, f.toString());
            rel = rel.substring(0, rel.lastIndexOf(".ko") + 3);
        }
        ElfImage image = ElfImage.parse(elf, f.toString());
        int want = GuestImages.elfMachine(arch);
        if (image.machine() != want) throw new KernelImageException(f + ": a module for another architecture (ELF machine " + image.machine() + ")");
        List<String> deps = new ArrayList<>(), soft = new ArrayList<>();
        var info = image.section(".modinfo");
        if (info.isPresent()) {
            var s = info.get();
            String all = new String(elf, (int) s.offset(), (int) s.size(), StandardCharsets.UTF_8);
            for (String field : all.split("\0")) {
                if (field.startsWith("softdep=")) {
                    boolean pre = false;
                    for (String w : field.substring("softdep=".length()).trim().split("\\s+")) {
                        if (w.equals("pre:")) pre = true;
                        else if (w.equals("post:")) pre = false;
                        else if (pre && !w.isBlank()) soft.add(moduleName(w));
                    }
                }
                if (field.startsWith("depends=") && field.length() > "depends=".length()) {
                    for (String d : field.substring("depends=".length()).split(",")) if (!d.isBlank()) deps.add(moduleName(d.trim()));
                }
            }
        }
        return new Module(name, rel, elf, List.copyOf(deps), List.copyOf(soft));
    }

    private java.util.Set<String> builtin() {
        java.util.Set<String> out = new java.util.HashSet<>();
        Path b = directory.resolve("modules.builtin");
        try {
            if (Files.isRegularFile(b)) for (String l : Files.readAllLines(b)) if (!l.isBlank()) out.add(moduleName(l.trim()));
        } catch (IOException ignored) {
            // without the list every module needs its file
        }
        return out;
    }

    private Map<String, Path> index() throws KernelImageException {
        if (files != null) return files;
        Map<String, Path> m = new HashMap<>();
        try (Stream<Path> s = Files.walk(directory.resolve("kernel"))) {
            for (Path p : s.filter(Files::isRegularFile).toList()) {
                String n = p.getFileName().toString();
                if (SUFFIXES.stream().anyMatch(n::endsWith)) m.putIfAbsent(moduleName(n), p);
            }
        } catch (IOException e) {
            throw new KernelImageException(directory + ": cannot list the modules: " + e.getMessage(), e);
        }
        return files = m;
    }

    /**
     * Puts the modules into {@code archive} under {@code /lib/modules/<release>/} and wraps its
     * {@code /init}: the new /init loads them in order with busybox's {@code insmod}, then
     * executes the guest's own init (moved to {@code /init.guest}) as process 1. A module that
     * fails to load stops the guest with a message naming it.
     */
    public static void install(Initramfs archive, List<Module> modules, String release) {
        StringBuilder init = new StringBuilder("""
                #!/bin/busybox sh
                # kpemu --modules: load the modules, then the guest's own init
                """);
        for (Module m : modules) {
            String guestPath = "lib/modules/" + release + "/" + m.path();
            archive.file(guestPath, 0644, m.elf());
            init.append("/bin/busybox insmod /").append(guestPath)
                    .append(" || { echo \"kpemu: insmod ").append(m.name()).append(" failed\"; /bin/busybox poweroff -f; }\n");
        }
        init.append("exec /init.guest \"$@\"\n");
        Initramfs.Entry guestInit = archive.entries().stream().filter(e -> e.path().equals("init")).findFirst().orElse(null);
        if (guestInit != null) archive.add(new Initramfs.Entry("init.guest", guestInit.mode(), guestInit.data(), 0, 0));
        archive.file("init", 0755, init.toString());
    }
}
