package dev.kpemu.image;

import static org.junit.jupiter.api.Assertions.*;

import dev.kpemu.machine.Arch;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** kallsyms decoded from Debian's real (stripped) kernels. */
@Tag("kernel")
class KallsymsTest {
    static GuestImages images;

    @BeforeAll
    static void fetch() throws Exception { images = GuestImages.forRepository(); }

    private static void commonChecks(SymbolTable t, int min, int max) {
        assertTrue(t.size() >= min && t.size() <= max, "symbol count " + t.size());
        for (String s : List.of("do_sys_openat2", "start_kernel", "_stext", "_etext", "__x64_sys_openat".equals("") ? "" : "kernel_init")) {
            assertTrue(t.byName(s).isPresent(), s);
        }
        List<Symbol> all = t.symbols();
        for (int i = 1; i < all.size(); i++) {
            assertTrue(Long.compareUnsigned(all.get(i - 1).address(), all.get(i).address()) <= 0, "ascending at " + i);
        }
        // well-known symbols are text, ordered as the linker puts them
        Symbol open = t.byName("do_sys_openat2").orElseThrow();
        assertEquals('t', Character.toLowerCase(open.type()));
        assertTrue(open.size() > 0x40 && open.size() < 0x1000, "size 0x" + Long.toHexString(open.size()));
        assertTrue(Long.compareUnsigned(t.address("_stext"), open.address()) < 0);
        assertTrue(Long.compareUnsigned(open.address(), t.address("_etext")) < 0);
        assertEquals('T', t.byName("start_kernel").orElseThrow().type());
        // lookup by address and the kernel's formatting
        assertEquals("do_sys_openat2+0x0/0x" + Long.toHexString(open.size()), t.format(open.address()));
        assertEquals("do_sys_openat2+0x10/0x" + Long.toHexString(open.size()), t.format(open.address() + 0x10));
        assertEquals(open, t.lookup(open.address() + open.size() - 1).orElseThrow());
        assertNotEquals("do_sys_openat2", t.lookup(open.address() + open.size()).orElseThrow().name());
    }

    @Test
    void x86_64() throws Exception {
        long t0 = System.nanoTime();
        ElfImage elf = ElfImage.read(images.vmlinux(Arch.X86_64));
        SymbolTable t = Kallsyms.fromElf(elf);
        long ms = (System.nanoTime() - t0) / 1_000_000;
        commonChecks(t, 80_000, 110_000);
        assertEquals(0xffffffff81000000L, t.address("_text"));
        assertEquals(t.address("_text"), t.linkBase());
        assertEquals(t.address("_text"), t.address("_stext"));
        // per-CPU symbols are absolute (CONFIG_KALLSYMS_ABSOLUTE_PERCPU)
        assertEquals(0L, t.address("__per_cpu_start"));
        Symbol open = t.byName("do_sys_openat2").orElseThrow();
        ElfImage.Segment seg = elf.loadSegmentContaining(open.address()).orElseThrow();
        assertTrue(seg.executable(), "do_sys_openat2 lies in an executable PT_LOAD: " + seg);
        assertEquals(elf.loadSegments().getFirst(), seg);
        // x86-64 function entry: 'endbr64' (IBT) or a 5-byte NOP/call for ftrace at the very start
        byte[] code = elf.bytesAt(open.address(), 8);
        boolean endbr = (code[0] & 0xff) == 0xf3 && (code[1] & 0xff) == 0x0f && (code[2] & 0xff) == 0x1e && (code[3] & 0xff) == 0xfa;
        boolean ftraceNop = (code[0] & 0xff) == 0x0f && (code[1] & 0xff) == 0x1f && (code[2] & 0xff) == 0x44;
        boolean call = (code[0] & 0xff) == 0xe8;
        assertTrue(endbr || ftraceNop || call, "do_sys_openat2 starts with " + hex(code));
        assertEquals(elf.fileOffsetOf(open.address()).getAsLong(), t.fileOffset(open.address()).getAsLong());
        System.out.printf("x86_64: %d symbols in %d ms; do_sys_openat2 %s (%s) bytes %s; start_kernel 0x%x%n",
                t.size(), ms, open, t.format(open.address()), hex(code), t.address("start_kernel"));
    }

    @Test
    void arm64() throws Exception {
        byte[] image = Files.readAllBytes(images.kernel(Arch.ARM64));
        long t0 = System.nanoTime();
        SymbolTable t = Kallsyms.fromArm64Image(image, "arm64 Image");
        long ms = (System.nanoTime() - t0) / 1_000_000;
        commonChecks(t, 40_000, 70_000);
        // link address of the Image: KIMAGE_VADDR for 48-bit VA kernels; _stext follows the 64K head
        assertEquals(0xffff800008000000L, t.linkBase());
        assertEquals(t.linkBase() + 0x10000, t.address("_stext"));
        Symbol open = t.byName("do_sys_openat2").orElseThrow();
        int off = (int) t.fileOffset(open.address()).getAsLong();
        ByteBuffer b = ByteBuffer.wrap(image).order(ByteOrder.LITTLE_ENDIAN);
        int[] w = new int[8];
        for (int i = 0; i < 8; i++) w[i] = b.getInt(off + 4 * i);
        // -fpatchable-function-entry=2 (ftrace): two NOPs, then 'paciasp' (ARM64_PTR_AUTH_KERNEL),
        // a stack allocation and 'stp x29, x30, [sp, #imm]' within the first instructions.
        final int NOP = 0xd503201f, PACIASP = 0xd503233f, BTI_C = 0xd503245f;
        assertEquals(NOP, w[0]);
        assertEquals(NOP, w[1]);
        assertTrue(w[2] == PACIASP || w[2] == BTI_C, "third word 0x" + Integer.toHexString(w[2]));
        boolean stpFp = false;
        for (int i = 2; i < 8; i++) {
            // STP (64-bit, signed offset 0xa9000000 or pre-index 0xa9800000) with Rt = x29, Rt2 = x30
            int op = w[i] & 0xffc00000;
            if ((op == 0xa9000000 || op == 0xa9800000) && (w[i] & 0x1f) == 29 && ((w[i] >>> 10) & 0x1f) == 30) stpFp = true;
        }
        assertTrue(stpFp, "stp x29, x30 in the prologue");
        // start_kernel too starts with the ftrace NOPs + paciasp
        int sk = (int) t.fileOffset(t.address("start_kernel")).getAsLong();
        assertEquals(PACIASP, b.getInt(sk + 8) == PACIASP ? PACIASP : b.getInt(sk));
        System.out.printf("arm64: %d symbols in %d ms; link base 0x%x; do_sys_openat2 %s (%s) at file offset 0x%x, words %08x %08x %08x %08x%n",
                t.size(), ms, t.linkBase(), open, t.format(open.address()), off, w[0], w[1], w[2], w[3]);
    }

    @Test
    void kallsymsReadAcceptsAnyKernelKind() throws Exception {
        SymbolTable a = Kallsyms.read(images.kernel(Arch.ARM64));
        SymbolTable x = Kallsyms.read(images.kernel(Arch.X86_64));
        assertTrue(a.byName("do_sys_openat2").isPresent());
        assertTrue(x.byName("do_sys_openat2").isPresent());
    }

    private static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }
}
