package dev.kpemu.boot;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.image.FileBytes;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelRelease;
import dev.kpemu.machine.Arch;

/**
 * A guest's release read at its {@code linux_banner} symbol is the release Debian's package
 * names (its {@code version} file, recorded when the kernel was fetched) and the one the first
 * banner in the whole file gives, on both arches' default kernel.
 */
@Tag("kernel")
class GuestReleaseTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void releaseAtTheBannerSymbolIsDebiansRelease(Arch arch) throws Exception {
        GuestImages images = GuestImages.forRepository();
        Path kernel = images.kernel(arch), initrd = images.initramfs(arch);
        String debian = images.kernelVersion(arch).get("release");
        BootRunner.Options o = new BootRunner.Options(arch, kernel, initrd, null, 256, 60, null, null);
        byte[] initrdBytes = Files.readAllBytes(initrd);
        try (LinuxGuest guest = arch == Arch.X86_64 ? X86LinuxGuest.prepare(o, kernel, initrdBytes)
                : Arm64LinuxGuest.prepare(o, kernel, FileBytes.read(kernel), initrdBytes)) {
            assertEquals(debian, guest.release(), "at linux_banner");
            assertEquals(debian, KernelRelease.of(guest.kernelFile()).orElse(""), "the first banner in the file");
        }
    }
}
