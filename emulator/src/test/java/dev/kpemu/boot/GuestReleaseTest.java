package dev.kpemu.boot;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.image.GuestImages;
import dev.kpemu.image.KernelRelease;
import dev.kpemu.machine.Arch;

/**
 * A guest's release is the release Debian's package names (its {@code version} file, recorded
 * when the kernel was fetched), read at the {@code linux_banner} symbol where the symbols name it
 * (x86-64) and as the first banner in the whole file, on both arches' default kernel.
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
        try (LinuxGuest guest = arch == Arch.X86_64 ? X86LinuxGuest.prepare(o, kernel, initrdBytes, false)
                : Arm64LinuxGuest.prepare(o, kernel, initrdBytes, false)) {
            if (arch == Arch.X86_64) {     // Debian's x86-64 kallsyms names data (linux_banner); its arm64 one does not
                long banner = guest.symbols().byName("linux_banner").orElseThrow().address();
                long offset = guest.symbols().fileOffset(banner).orElseThrow();
                assertEquals(debian, KernelRelease.at(guest.kernelFile(), offset).orElse(""), "at linux_banner's file offset");
            }
            assertEquals(debian, guest.release());
            assertEquals(debian, KernelRelease.of(guest.kernelFile()).orElse(""), "the first banner in the file");
        }
    }
}
