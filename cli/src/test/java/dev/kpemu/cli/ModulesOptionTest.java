package dev.kpemu.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.kpemu.image.Initramfs;

/** {@code --modules}: what goes into the initramfs, and one-line errors for what cannot. */
@Tag("kernel")
class ModulesOptionTest {
    @Test
    void initramfsGetsTheModulesTheirDependenciesAndALoader(@TempDir Path tmp) throws Exception {
        Path out = tmp.resolve("g.cpio");
        CliTest.Run r = CliTest.run("initramfs", "--arch", "arm64", "--modules", "ext4", "-o", out.toString());
        assertEquals(ExitCodes.OK, r.code(), r.err());
        List<Initramfs.Member> members = Initramfs.read(Files.readAllBytes(out));
        String init = members.stream().filter(m -> m.name().equals("init")).map(m -> new String(m.data())).findFirst().orElseThrow();
        int jbd2 = init.indexOf("/jbd2.ko"), ext4 = init.indexOf("/ext4.ko");
        assertTrue(jbd2 > 0 && ext4 > jbd2, "dependencies are loaded first:\n" + init);
        assertTrue(init.contains("exec /init.guest"), init);
        assertTrue(members.stream().anyMatch(m -> m.name().equals("init.guest")), "the guest's own init is kept");
        byte[] ko = members.stream().filter(m -> m.name().endsWith("/ext4.ko")).findFirst().orElseThrow().data();
        assertEquals(0x7f, ko[0]);
        assertEquals('E', ko[1]);                       // an uncompressed ELF, as busybox insmod wants
        assertEquals(183, (ko[18] & 0xff) | (ko[19] & 0xff) << 8, "EM_AARCH64");
    }

    @Test
    void unknownModuleIsAUsageErrorOnOneLine(@TempDir Path tmp) {
        CliTest.Run r = CliTest.run("initramfs", "--arch", "x86_64", "--modules", "no_such_module", "-o", tmp.resolve("g.cpio").toString());
        assertEquals(ExitCodes.USAGE, r.code());
        List<String> lines = r.err().lines().filter(l -> !l.startsWith("fetch-modules:")).toList();
        assertEquals(1, lines.size(), r.err());
        assertTrue(lines.getFirst().startsWith("kpemu: no module 'no_such_module' for kernel "), r.err());
        assertFalse(Files.exists(tmp.resolve("g.cpio")));
    }

    @Test
    void aKernelFileHasNoModulesToTake(@TempDir Path tmp) throws Exception {
        Path fake = Files.writeString(tmp.resolve("vmlinuz"), "not a kernel");
        CliTest.Run r = CliTest.run("initramfs", "--arch", "x86_64", "--kernel", fake.toString(), "--modules", "ext4",
                "-o", tmp.resolve("g.cpio").toString());
        assertEquals(ExitCodes.USAGE, r.code());
        assertTrue(r.err().strip().startsWith("kpemu: --modules needs a Debian kernel"), r.err());
    }
}
