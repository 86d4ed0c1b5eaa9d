package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.*;

import dev.kpemu.machine.Arch;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Header parsing on Debian's real kernels (fetched into the cache on first use). */
@Tag("kernel")
class KernelHeadersTest {
    static GuestImages images;

    @BeforeAll
    static void fetch() throws Exception { images = GuestImages.forRepository(); }

    @Test
    void arm64ImageHeader() throws Exception {
        Path k = images.kernel(Arch.ARM64);
        Arm64Image h = Arm64Image.read(k);
        assertEquals(0, h.textOffset());
        assertFalse(h.bigEndian());
        assertEquals(4096, h.pageSize());
        assertTrue(h.physicalPlacementAnywhere());
        assertEquals(0xaL, h.flags());
        assertTrue(h.hasEfiStub(), "Debian's Image carries an EFI stub");
        assertEquals('M', Files.readAllBytes(k)[0]);
        assertTrue(h.imageSize() >= Files.size(k) && h.imageSize() < 256L << 20, "image_size 0x" + Long.toHexString(h.imageSize()));
        assertEquals(0x40000000L, h.loadAddress(0x40000000L));
        assertEquals(0x40200000L, h.loadAddress(0x40001000L));
        System.out.printf("arm64 %s: %d bytes, image_size 0x%x, flags 0x%x%n", images.kernelVersion(Arch.ARM64).get("release"), h.fileSize(), h.imageSize(), h.flags());
    }

    @Test
    void bzImageHeaderAndPayload() throws Exception {
        Path k = images.kernel(Arch.X86_64);
        BzImage b = BzImage.read(k);
        assertTrue(b.protocolVersion() >= 0x20f, b.protocolString());
        assertEquals("2.15", b.protocolString());
        assertTrue(b.setupSects() > 4 && b.setupSects() < 64);
        assertEquals(0x1000000L, b.prefAddress());
        assertEquals(0x200000L, b.kernelAlignment());
        assertTrue(b.relocatable());
        assertTrue(b.has64BitEntry());
        assertEquals(2047, b.cmdlineSize());
        assertEquals("xz", b.payloadCompression());
        long t0 = System.nanoTime();
        byte[] vmlinux = b.extractVmlinux();
        long ms = (System.nanoTime() - t0) / 1_000_000;
        assertEquals(b.trailerSize(), vmlinux.length);
        ElfImage elf = ElfImage.parse(vmlinux, "vmlinux");
        assertEquals(ElfImage.EM_X86_64, elf.machine());
        assertEquals(0x1000000L, elf.entry());
        assertEquals(4, elf.loadSegments().size());
        assertEquals(5, elf.segments().size(), "4 PT_LOAD + PT_NOTE");
        assertTrue(elf.loadSegments().getFirst().executable());
        assertEquals(0xffffffff81000000L, elf.loadSegments().getFirst().vaddr());
        assertEquals(0x1000000L, elf.loadSegments().getFirst().paddr());
        long span = elf.loadSegments().stream().mapToLong(x -> x.paddr() + x.memsz()).max().orElseThrow() - b.prefAddress();
        assertTrue(b.initSize() >= span, "init_size 0x" + Long.toHexString(b.initSize()) + " covers the loaded kernel 0x" + Long.toHexString(span));
        long pvh = elf.pvhEntry().orElseThrow(() -> new AssertionError("no XEN_ELFNOTE_PHYS32_ENTRY note"));
        assertTrue(pvh > 0x1000000L && pvh < 0x1000000L + b.initSize(), "PVH entry 0x" + Long.toHexString(pvh));
        System.out.println(b);
        System.out.printf("vmlinux %d bytes in %d ms, entry 0x%x, PVH entry 0x%x%n", vmlinux.length, ms, elf.entry(), pvh);
        elf.loadSegments().forEach(s -> System.out.println("  " + s));
    }

    @Test
    void wrongFilesGiveClearErrors(@TempDir Path tmp) throws Exception {
        Path empty = Files.createFile(tmp.resolve("empty"));
        Path random = tmp.resolve("random");
        byte[] r = new byte[1 << 16];
        new Random(42).nextBytes(r);
        Files.write(random, r);
        Path missing = tmp.resolve("missing");

        String m = assertThrows(KernelImageException.class, () -> BzImage.read(empty)).getMessage();
        assertTrue(m.contains("not an x86 bzImage") && m.contains("empty"), m);
        m = assertThrows(KernelImageException.class, () -> Arm64Image.read(empty)).getMessage();
        assertTrue(m.contains("not an arm64 Image") && m.contains("empty"), m);
        m = assertThrows(KernelImageException.class, () -> BzImage.read(random)).getMessage();
        assertTrue(m.contains("not an x86 bzImage"), m);
        m = assertThrows(KernelImageException.class, () -> Arm64Image.read(random)).getMessage();
        assertTrue(m.contains("not an arm64 Image"), m);
        m = assertThrows(KernelImageException.class, () -> ElfImage.read(random)).getMessage();
        assertTrue(m.contains("not an ELF file"), m);
        m = assertThrows(KernelImageException.class, () -> Kallsyms.read(random)).getMessage();
        assertTrue(m.contains("not a kernel image"), m);
        m = assertThrows(KernelImageException.class, () -> BzImage.read(missing)).getMessage();
        assertTrue(m.contains("does not exist"), m);

        // the other architecture's kernel
        m = assertThrows(KernelImageException.class, () -> BzImage.read(images.kernel(Arch.ARM64))).getMessage();
        assertTrue(m.contains("not an x86 bzImage") && m.contains("it is an arm64 Image"), m);
        m = assertThrows(KernelImageException.class, () -> Arm64Image.read(images.kernel(Arch.X86_64))).getMessage();
        assertTrue(m.contains("not an arm64 Image") && m.contains("it is an x86 bzImage"), m);
        assertFalse(m.contains("\n"));

        // a truncated bzImage: the payload lies outside the file
        byte[] bz = Files.readAllBytes(images.kernel(Arch.X86_64));
        Path cut = tmp.resolve("cut");
        Files.write(cut, java.util.Arrays.copyOf(bz, bz.length / 2));
        m = assertThrows(KernelImageException.class, () -> BzImage.read(cut)).getMessage();
        assertTrue(m.contains("corrupt bzImage"), m);
        // a damaged XZ payload
        BzImage good = BzImage.parse(bz, "bz");
        byte[] dam = bz.clone();
        for (int i = 0; i < 4096; i++) dam[(int) good.payloadFileOffset() + 100_000 + i] ^= 0x5a;
        m = assertThrows(KernelImageException.class, () -> BzImage.parse(dam, "damaged").extractVmlinux()).getMessage();
        assertTrue(m.contains("corrupt or truncated xz payload"), m);
        // a corrupted arm64 header
        byte[] img = java.util.Arrays.copyOf(Files.readAllBytes(images.kernel(Arch.ARM64)), 4096);
        img[0x18] = (byte) 0xf0; // flags with unknown bits
        m = assertThrows(KernelImageException.class, () -> Arm64Image.parse(img, "img")).getMessage();
        assertTrue(m.contains("corrupt arm64 Image header"), m);
    }
}
