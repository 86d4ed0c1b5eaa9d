package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.*;

import dev.kpemu.machine.Arch;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The facade on the real cache: kernels, busybox and the default initramfs for both arches. */
@Tag("kernel")
class GuestImagesTest {

    @Test
    void guestsForBothArchitectures() throws Exception {
        GuestImages g = GuestImages.forRepository();
        for (Arch arch : Arch.values()) {
            GuestImages.Guest guest = g.guest(arch);
            assertTrue(Files.size(guest.kernel()) > 1_000_000, arch + " kernel");
            assertTrue(guest.version().get("package").matches("linux-image-\\d.*-" + GuestImages.debianName(arch)), guest.version().toString());
            assertTrue(guest.release().endsWith("-" + GuestImages.debianName(arch)));
            assertTrue(Files.readString(g.config(arch)).contains("CONFIG_KALLSYMS=y"));
            assertEquals(g.directory(arch).resolve("initramfs.cpio"), guest.initramfs());
            List<Initramfs.Member> m = Initramfs.read(Files.readAllBytes(guest.initramfs()));
            byte[] bb = m.stream().filter(x -> x.name().equals("bin/busybox")).findFirst().orElseThrow().data();
            assertArrayEquals(Files.readAllBytes(g.busybox(arch)), bb);
            int machine = (bb[18] & 0xff) | (bb[19] & 0xff) << 8;
            assertEquals(GuestImages.elfMachine(arch), machine, "busybox is built for " + arch);
            System.out.printf("%s: %s %s, initramfs %d bytes%n", arch, guest.version().get("package"), guest.version().get("version"), Files.size(guest.initramfs()));
        }
    }

    /** Debian's own busybox cpio (runs on an x86-64 host) lists and unpacks our archive. */
    @Test
    void busyboxCpioReadsOurArchive(@TempDir Path tmp) throws Exception {
        String host = System.getProperty("os.arch");
        org.junit.jupiter.api.Assumptions.assumeTrue(host.equals("amd64") || host.equals("x86_64"), "needs an x86-64 host to run busybox");
        GuestImages g = GuestImages.forRepository();
        Path bb = g.busybox(Arch.X86_64);
        byte[] archive = new Initramfs().file("init", 0755, "#!/bin/sh\necho hi\n").symlink("bin/sh", "busybox")
                .dir("etc", 0700).file("etc/motd", 0644, "x".repeat(1001)).toBytes();
        Path a = Files.write(tmp.resolve("a.cpio"), archive);
        Path out = Files.createDirectories(tmp.resolve("out"));
        Process p = new ProcessBuilder(bb.toString(), "cpio", "-i", "-d", "-F", a.toString()).directory(out.toFile())
                .redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);   // to its end
        p.waitFor();
        assertEquals(0, p.exitValue(), log);
        assertEquals("#!/bin/sh\necho hi\n", Files.readString(out.resolve("init")));
        assertTrue(Files.isExecutable(out.resolve("init")));
        assertEquals("busybox", Files.readSymbolicLink(out.resolve("bin/sh")).toString());
        assertEquals(1001, Files.size(out.resolve("etc/motd")));
    }
}
