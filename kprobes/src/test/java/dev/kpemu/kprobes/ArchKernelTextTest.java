package dev.kpemu.kprobes;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.Arch;

/**
 * The one copy of the arches' self-patched text forms ({@link ArchKernelText}), on encodings
 * written by hand from the Intel SDM (endbr64 {@code f3 0f 1e fa}, {@code call rel32} {@code e8},
 * the 5-byte NOP {@code 0f 1f 44 00 00}, {@code jmp rel8} {@code eb}, {@code jmp rel32} {@code e9})
 * and the Arm ARM ({@code bti c} {@code d503245f}, {@code paciasp} {@code d503233f},
 * {@code mov x9, x30} {@code aa1e03e9}, {@code nop} {@code d503201f}, {@code bl}/{@code b}
 * {@code 94000000}/{@code 14000000} | imm26), and the kernel's sealed-endbr NOP of 6.1
 * ({@code 0f 1f 40 d6}, {@code apply_seal_endbr}).
 */
class ArchKernelTextTest {
    private static final ArchKernelText X86 = ArchKernelText.of(Arch.X86_64), ARM64 = ArchKernelText.of(Arch.ARM64);

    private static byte[] b(int... v) {
        byte[] out = new byte[v.length];
        for (int i = 0; i < v.length; i++) out[i] = (byte) v[i];
        return out;
    }

    private static byte[] words(int... w) {
        byte[] out = new byte[4 * w.length];
        for (int i = 0; i < w.length; i++) for (int k = 0; k < 4; k++) out[4 * i + k] = (byte) (w[i] >>> (8 * k));
        return out;
    }

    @Test
    void x86FunctionEntries() {
        byte[] endbrCall = b(0xf3, 0x0f, 0x1e, 0xfa, 0xe8, 0x10, 0x20, 0x30, 0x40);
        assertEquals(4, X86.probeSkip(endbrCall));
        assertEquals(4, X86.ftraceSite(endbrCall));
        byte[] sealedNop5 = b(0x0f, 0x1f, 0x40, 0xd6, 0x0f, 0x1f, 0x44, 0x00, 0x00);
        assertEquals(4, X86.probeSkip(sealedNop5));
        assertEquals(4, X86.ftraceSite(sealedNop5));
        byte[] nop5 = b(0x0f, 0x1f, 0x44, 0x00, 0x00, 0x55, 0x48, 0x89, 0xe5);
        assertEquals(0, X86.probeSkip(nop5));
        assertEquals(0, X86.ftraceSite(nop5));
        byte[] pushRbp = b(0x55, 0x48, 0x89, 0xe5, 0x53, 0x48, 0x83, 0xec, 0x08);
        assertEquals(0, X86.probeSkip(pushRbp));
        assertEquals(-1, X86.ftraceSite(pushRbp));
    }

    @Test
    void arm64FunctionEntries() {
        int nop = 0xd503201f, btiC = 0xd503245f, paciasp = 0xd503233f, movX9X30 = 0xaa1e03e9, bl = 0x94000010;
        assertEquals(8, ARM64.ftraceSite(words(btiC, movX9X30, bl)));
        assertEquals(8, ARM64.ftraceSite(words(paciasp, nop, nop)));
        assertEquals(4, ARM64.ftraceSite(words(nop, nop, 0xa9bf7bfd)));
        assertEquals(-1, ARM64.ftraceSite(words(0xa9bf7bfd, 0x910003fd, nop)), "stp x29, x30, [sp, #-16]!; mov x29, sp: no pair");
        assertEquals(0, ARM64.probeSkip(words(btiC, nop, nop)), "arm64 kprobes probe the landing pad itself");
    }

    @Test
    void jumpLabelSites() {
        long code = 0xffffffff81000000L;
        assertArrayEquals(b(0xeb, 0x0e), X86.jumpOver(b(0x66, 0x90, 0xcc, 0xcc, 0xcc), code, code + 0x10));
        assertArrayEquals(b(0xe9, 0xfb, 0x00, 0x00, 0x00), X86.jumpOver(b(0x0f, 0x1f, 0x44, 0x00, 0x00), code, code + 0x100));
        assertNull(X86.jumpOver(b(0xe9, 0x00, 0x00, 0x00, 0x00), code, code + 0x100), "already a jump");
        long a = 0xffff800008000000L;
        assertArrayEquals(words(0x14000040), ARM64.jumpOver(words(0xd503201f), a, a + 0x100));
        assertArrayEquals(words(0x17ffffff), ARM64.jumpOver(words(0xd503201f), a, a - 4));
        assertNull(ARM64.jumpOver(words(0x14000040), a, a + 0x100), "already a branch");
    }
}
