package dev.kpemu.cli;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.KernelChoice;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.image.KernelModules;
import dev.kpemu.machine.Arch;

/**
 * {@code --modules NAME…} of {@code boot} and {@code initramfs}: the booted Debian kernel's own
 * modules (same package and version), their dependencies, put into the guest's initramfs and
 * loaded by a wrapping {@code /init} before the guest's own init runs.
 */
public final class GuestModules {
    private GuestModules() {}

    /** Module names as given: repeated options and comma-separated lists. */
    public static List<String> names(List<String> given) {
        List<String> out = new ArrayList<>();
        for (String g : given) for (String n : g.split(",")) if (!n.isBlank()) out.add(n.strip());
        return out;
    }

    /** Adds the modules (with their dependencies) to {@code archive} and wraps its /init; returns what was added, in load order. */
    public static List<KernelModules.Module> install(Initramfs archive, Arch arch, KernelChoice kernel, List<String> names) throws KernelImageException {
        KernelModules mods = GuestImages.forRepository().modules(arch, kernel);
        List<KernelModules.Module> order = mods.resolve(names);
        KernelModules.install(archive, order, mods.release());
        return order;
    }

    /** An archive read from a newc file, to add modules to. */
    public static Initramfs read(Path initrd) throws KernelImageException {
        byte[] bytes;
        try {
            bytes = Files.readAllBytes(initrd);
        } catch (IOException e) {
            throw new KernelImageException(initrd + ": cannot read: " + e.getMessage(), e);
        }
        Initramfs archive = new Initramfs();
        try {
            for (Initramfs.Member m : Initramfs.read(bytes)) {
                if (m.name().equals(".")) continue;
                archive.add(new Initramfs.Entry(m.name(), m.mode(), m.data(), m.rdevMajor(), m.rdevMinor()));
            }
        } catch (KernelImageException e) {
            throw new KernelImageException(initrd + ": --modules needs an uncompressed newc initramfs (" + e.getMessage() + ")");
        }
        return archive;
    }

    /** {@code initrd} with the modules added, written to a temporary file deleted when kpemu exits. */
    public static Path withModules(Path initrd, Arch arch, KernelChoice kernel, List<String> names) throws KernelImageException {
        Initramfs archive = read(initrd);
        install(archive, arch, kernel, names);
        try {
            Path tmp = Files.createTempFile("kpemu-modules-", ".cpio");
            tmp.toFile().deleteOnExit();
            Files.write(tmp, archive.toBytes());
            return tmp;
        } catch (IOException e) {
            throw new KernelImageException("cannot write the initramfs with modules: " + e.getMessage(), e);
        }
    }
}
