package dev.kpemu.image;

import dev.kpemu.machine.Arch;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;

/**
 * Files and directories from the host copied into a guest's initramfs ({@code --add
 * HOSTPATH[:GUESTPATH]}): regular files keep their permission bits, directories are copied
 * recursively, symbolic links stay links. An ELF executable built for the other architecture is
 * refused, since the guest could not run it.
 */
public final class HostFiles {
    private HostFiles() {}

    /** {@code HOSTPATH[:GUESTPATH]}: where a host path goes in the guest (default: {@code /} + its file name). */
    public record Mapping(Path host, String guest) {
        public static Mapping parse(String spec) {
            int colon = spec.lastIndexOf(':');
            Path host = Path.of(colon > 0 ? spec.substring(0, colon) : spec);
            String guest = colon > 0 ? spec.substring(colon + 1) : "/" + host.getFileName();
            return new Mapping(host, guest);
        }

        /** The archive path: no leading slash, no trailing slash. */
        String archivePath() {
            String g = guest.replaceAll("/+", "/");
            while (g.startsWith("/")) g = g.substring(1);
            while (g.endsWith("/")) g = g.substring(0, g.length() - 1);
            return g;
        }
    }

    /** Copies {@code m.host()} into {@code archive} for a guest of {@code arch}. */
    public static void add(Initramfs archive, Mapping m, Arch arch) throws KernelImageException {
        Path host = m.host();
        if (!Files.exists(host, LinkOption.NOFOLLOW_LINKS)) throw new KernelImageException(host + ": no such file or directory");
        String target = m.archivePath();
        if (target.isEmpty()) throw new KernelImageException(m.guest() + ": give a guest path below /, e.g. " + host + ":/" + host.getFileName());
        try {
            copy(archive, host, target, arch);
        } catch (KernelImageException e) {
            throw e;                                    // already one line naming the file
        } catch (IOException e) {
            throw new KernelImageException(host + ": cannot read: " + e.getMessage(), e);
        }
    }

    /** Copies one host file to {@code guestPath} with mode 0755 (an /init the guest must be able to execute). */
    public static void addExecutable(Initramfs archive, Path host, String guestPath, Arch arch) throws KernelImageException {
        if (!Files.isRegularFile(host)) throw new KernelImageException(host + ": not a regular file");
        try {
            byte[] data = Files.readAllBytes(host);
            checkElfArch(host, data, arch);
            archive.file(new Mapping(host, guestPath).archivePath(), 0755, data);
        } catch (KernelImageException e) {
            throw e;
        } catch (IOException e) {
            throw new KernelImageException(host + ": cannot read: " + e.getMessage(), e);
        }
    }

    private static void copy(Initramfs archive, Path host, String target, Arch arch) throws IOException, KernelImageException {
        if (Files.isSymbolicLink(host)) {
            archive.symlink(target, Files.readSymbolicLink(host).toString());
        } else if (Files.isDirectory(host)) {
            archive.dir(target, permissions(host));
            List<Path> children;
            try (Stream<Path> s = Files.list(host)) {
                children = s.sorted().toList();
            }
            for (Path c : children) copy(archive, c, target + "/" + c.getFileName(), arch);
        } else if (Files.isRegularFile(host)) {
            byte[] data = Files.readAllBytes(host);
            checkElfArch(host, data, arch);
            archive.file(target, permissions(host), data);
        } else {
            throw new KernelImageException(host + ": not a regular file, directory or symbolic link");
        }
    }

    /** An ELF file whose e_machine is not the guest's is refused with one line. */
    static void checkElfArch(Path host, byte[] data, Arch arch) throws KernelImageException {
        if (data.length < 20 || !ImageFiles.startsWith(data, 0, ImageFiles.ELF)) return;
        int machine = ByteBuffer.wrap(data).order(data[5] == 2 ? ByteOrder.BIG_ENDIAN : ByteOrder.LITTLE_ENDIAN).getShort(18) & 0xffff;
        int want = GuestImages.elfMachine(arch);
        if (machine != want) {
            String what = machine == ElfImage.EM_X86_64 ? "x86_64" : machine == ElfImage.EM_AARCH64 ? "arm64" : "e_machine " + machine;
            throw new KernelImageException(host + ": an ELF file for " + what + ", but the guest is " + arch.linuxName());
        }
    }

    private static int permissions(Path p) throws IOException {
        try {
            Set<PosixFilePermission> perms = Files.getPosixFilePermissions(p, LinkOption.NOFOLLOW_LINKS);
            int mode = 0;
            for (PosixFilePermission x : perms) mode |= 1 << (8 - x.ordinal());
            return mode;
        } catch (UnsupportedOperationException e) {
            return Files.isDirectory(p) || Files.isExecutable(p) ? 0755 : 0644;
        }
    }
}
