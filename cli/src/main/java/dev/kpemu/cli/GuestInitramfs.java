package dev.kpemu.cli;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import dev.kpemu.image.CommandGuest;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.HostFiles;
import dev.kpemu.image.Initramfs;
import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;

/**
 * The initramfs {@code kpemu boot} builds for this run: kpemu's busybox guest with the command's
 * /init ({@link CommandGuest}) when a command (or a terminal session) is asked for, else the
 * default workload, plus the host files of {@code --add}. Written to a temporary directory; the
 * caller deletes the file (the directory goes at exit).
 */
final class GuestInitramfs {
    private GuestInitramfs() {}

    /**
     * @param command the guest command (empty with {@code terminalSession}: a shell)
     * @param adds {@code HOSTPATH[:GUESTPATH]} specs
     * @throws KernelImageException a missing host path, or an ELF file of the other arch (one line)
     */
    static Path write(Arch arch, List<String> command, boolean terminalSession, List<String> adds) throws KernelImageException, IOException {
        byte[] busybox = Files.readAllBytes(GuestImages.forRepository().busybox(arch));
        Initramfs archive = command.isEmpty() && !terminalSession
                ? Initramfs.defaultGuest(busybox)
                : CommandGuest.initramfs(busybox, arch, command, terminalSession);
        for (String spec : adds) HostFiles.add(archive, HostFiles.Mapping.parse(spec), arch);
        // a fixed name in a fresh directory: a recorded trace's header names the initramfs
        Path dir = Files.createTempDirectory("kpemu-");
        dir.toFile().deleteOnExit();
        Path file = dir.resolve(command.isEmpty() && !terminalSession ? "kpemu-guest.cpio" : "kpemu-command-guest.cpio");
        file.toFile().deleteOnExit();
        return archive.write(file);
    }
}
