package dev.kpemu.unicorn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Where the engine state keeps its CPU, read from libunicorn's code ({@link TlbSetDirty}). */
class TlbSetDirtyTest {
    private static byte[] bytes(int... b) {
        byte[] out = new byte[b.length];
        for (int i = 0; i < b.length; i++) out[i] = (byte) b[i];
        return out;
    }

    @Test
    void readsTheOffsetOfTheLoadBeforeTheNullTest() {
        // Debian's 2.1.4 uc_emu_stop: endbr64; sub $0x18,%rsp; cmpb $0,0x7f3(%rdi); je; movb $1,0x56d(%rdi);
        // cmpb $0,0x56f(%rdi); jne; mov 0x1b8(%rdi),%rdi; test %rdi,%rdi
        byte[] code = bytes(0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0xec, 0x18, 0x80, 0xbf, 0xf3, 0x07, 0, 0, 0x00, 0x74, 0x2f,
                0xc6, 0x87, 0x6d, 0x05, 0, 0, 0x01, 0x80, 0xbf, 0x6f, 0x05, 0, 0, 0x00, 0x75, 0x11,
                0x48, 0x8b, 0xbf, 0xb8, 0x01, 0, 0, 0x48, 0x85, 0xff, 0x74, 0x05);
        assertEquals(0x1b8, TlbSetDirty.engineCpuOffsetIn(code));
    }

    @Test
    void otherCodeGivesNoOffset() {
        // the load without the test after it, a load into another register, a misaligned offset
        assertEquals(-1, TlbSetDirty.engineCpuOffsetIn(bytes(0x48, 0x8b, 0xbf, 0xb8, 0x01, 0, 0, 0x48, 0x89, 0xc7)));
        assertEquals(-1, TlbSetDirty.engineCpuOffsetIn(bytes(0x48, 0x8b, 0x87, 0xb8, 0x01, 0, 0, 0x48, 0x85, 0xc0)));
        assertEquals(-1, TlbSetDirty.engineCpuOffsetIn(bytes(0x48, 0x8b, 0xbf, 0xb9, 0x01, 0, 0, 0x48, 0x85, 0xff)));
        assertEquals(-1, TlbSetDirty.engineCpuOffsetIn(new byte[0]));
    }

    @Test
    void theFetchedLibraryShowsBoth() {
        // the libunicorn the project fetches (Debian's 2.1.4) exports tlb_set_dirty_x86_64 and has the load
        var call = Unicorn.tlbSetDirtyX86();
        assertTrue(call.isPresent(), "tlb_set_dirty_x86_64 and uc_emu_stop's CPU load");
        assertTrue(call.get().engineCpuOffset() > 0);
    }
}
