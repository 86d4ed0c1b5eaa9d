package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.image.KernelImageException;
import dev.kpemu.machine.Arch;

/** The benches' reference machine: found on PATH, or a one-line error naming the package. */
class ReferenceQemuTest {
    @Test
    void findsOnlyAnExecutableFileOnThePath(@TempDir Path dir) throws Exception {
        Path bin = Files.createDirectory(dir.resolve("bin")), other = Files.createDirectory(dir.resolve("other"));
        Files.writeString(bin.resolve("qemu-system-aarch64"), "#!/bin/sh\n");
        Files.writeString(other.resolve("qemu-system-x86_64"), "not executable\n");
        Files.setPosixFilePermissions(bin.resolve("qemu-system-aarch64"), PosixFilePermissions.fromString("rwxr-xr-x"));
        String path = other + File.pathSeparator + bin;
        assertTrue(ReferenceQemu.onPath("qemu-system-aarch64", path));
        assertFalse(ReferenceQemu.onPath("qemu-system-x86_64", path), "a file that cannot be run is not QEMU");
        assertFalse(ReferenceQemu.onPath("qemu-system-aarch64", ""));
        assertDoesNotThrow(() -> ReferenceQemu.require(null, Arch.ARM64, path));
    }

    @Test
    void missingWithoutAWayToInstallSaysWhichPackage() {
        KernelImageException e = assertThrows(KernelImageException.class, () -> ReferenceQemu.require(null, Arch.X86_64, ""));
        assertEquals("qemu-system-x86_64 is missing: the bench runs QEMU beside kpemu; install Debian's qemu-system-x86", e.getMessage());
        assertEquals("qemu-system-arm", ReferenceQemu.debianPackage(Arch.ARM64));
    }
}
