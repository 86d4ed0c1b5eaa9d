package dev.kpemu.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.util.zip.GZIPInputStream;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.kpemu.image.ElfImage;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.Kallsyms;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import dev.kpemu.optprobes.KernelOptimizationInputs;
import dev.kpemu.optprobes.TextRange;

/** The tables {@link KernelOptimizationInputs} reads from Debian's kernel files, checked against the files themselves. */
@Tag("kernel")
class KernelOptimizationInputsTest {

    @Test
    void x86TablesMatchTheElfSectionsAndTheCode() throws Exception {
        GuestImages images = GuestImages.forRepository();
        ElfImage elf = ElfImage.read(images.vmlinux(Arch.X86_64));
        SymbolTable syms = Kallsyms.fromElf(elf);
        KernelOptimizationInputs in = KernelOptimizationInputs.read(Arch.X86_64, syms, elf.bytes());
        System.out.println(in + "\n  " + String.join("\n  ", in.notes()));
        // __ex_table: the section holds exactly the entries, 12 bytes each
        ElfImage.Section ex = elf.section("__ex_table").orElseThrow();
        assertEquals(ex.size() / 12, in.exceptionTable().size());
        // every exception-table address is in a function (e.g. a uaccess instruction)
        for (long a : in.exceptionTable()) {
            assertTrue(syms.lookup(a).map(dev.kpemu.image.Symbol::text).orElse(false), Long.toHexString(a));
        }
        // ftrace sites: a call __fentry__ in the file (objtool/recordmcount record the call)
        long fentry = syms.address("__fentry__");
        int calls = 0;
        for (long site : in.ftraceSites()) {
            byte[] b = elf.bytesAt(site, 5);
            if ((b[0] & 0xff) == 0xe8 && site + 5 + ByteBuffer.wrap(b, 1, 4).order(ByteOrder.LITTLE_ENDIAN).getInt() == fentry) calls++;
        }
        assertEquals(in.ftraceSites().size(), calls, "every __mcount_loc entry is a call __fentry__");
        assertTrue(in.ftraceSites().contains(syms.address("ksys_read")));
        assertTrue(in.ftraceSites().contains(syms.address("do_sys_openat2")));
        // reserved text lies in kernel text (jump labels, static calls, alternatives); some in the probed functions' neighbourhood
        assertTrue(in.reservedText().size() > 1000);
        for (TextRange r : in.reservedText()) {
            assertTrue(Long.compareUnsigned(r.start(), 0xffffffff81000000L) >= 0 && r.end() - r.start() < 256, r.toString());
        }
        assertNotNull(in.indirectThunks());
        assertEquals(2, in.returnToUser().size());
        assertTrue(in.idleText().stream().anyMatch(r -> r.contains(syms.address("default_idle"))));
    }

    @Test
    void arm64FtraceSitesAreTheFunctionEntries() throws Exception {
        GuestImages images = GuestImages.forRepository();
        byte[] image = Files.readAllBytes(images.kernel(Arch.ARM64));
        if ((image[0] & 0xff) == 0x1f && (image[1] & 0xff) == 0x8b) {
            try (var in = new GZIPInputStream(new java.io.ByteArrayInputStream(image))) {
                image = in.readAllBytes();
            }
        }
        SymbolTable syms = images.symbols(Arch.ARM64);
        KernelOptimizationInputs in = KernelOptimizationInputs.read(Arch.ARM64, syms, image);
        System.out.println(in + "\n  " + String.join("\n  ", in.notes()));
        for (String fn : new String[] {"ksys_read", "vfs_write", "do_sys_openat2"}) {
            long a = syms.address(fn);
            assertTrue(in.ftraceSites().contains(a) && in.ftraceSites().contains(a + 4), fn);
            assertTrue(!in.ftraceSites().contains(a + 12), fn);
        }
        assertTrue(in.ftraceSites().size() > 20_000);
        // possible jump-label sites: every nop and b of a function, except its ftrace pair
        var vfsWrite = syms.byName("vfs_write").orElseThrow();
        TextRange fn = TextRange.of(vfsWrite.address(), vfsWrite.size());
        var reserved = in.reservedText(fn);
        assertTrue(!reserved.isEmpty(), "vfs_write has branches");
        long off = syms.fileOffset(fn.start()).getAsLong();
        for (TextRange r : reserved) {
            int w = ByteBuffer.wrap(image, (int) (off + r.start() - fn.start()), 4).order(ByteOrder.LITTLE_ENDIAN).getInt();
            assertTrue(w == 0xd503201f || (w & 0xfc000000) == 0x14000000, Integer.toHexString(w));
            assertTrue(r.start() != fn.start() && r.start() != fn.start() + 4, "the ftrace pair is an ftrace site, not reserved");
        }
        assertTrue(in.exceptionTable().isEmpty(), "not readable on arm64 (no CONFIG_KALLSYMS_ALL)");
        assertTrue(in.landingPadsEnforced());
        assertEquals(1, in.returnToUser().size());
    }
}
