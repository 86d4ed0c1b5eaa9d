package dev.kpemu.unicorn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.arm64.Arm64Machine;
import dev.kpemu.machine.x86.X86Machine;
import dev.kpemu.testing.Asm;

/**
 * {@link Unicorn#setExitAfterAccess}: with Unicorn's exit check after guest loads and stores, a
 * stop asked for during a store (here from an MMIO callback, which is no hook) ends the block
 * right there; without it the block runs to its end, as under QEMU. A code or memory hook brings
 * the check back while it exists. Machine engines run without it.
 */
class ExitAfterAccessTest {
    static final long BASE = 0x10000, MMIO = 0x40000;

    @Test
    void theDebianUnicornShowsTheFlag() {
        assertTrue(Unicorn.exitAfterAccessControllable(), "libunicorn's check_exit_request has the shape AccessExitFlag reads");
    }

    @Test
    void codeOfAnotherShapeGivesNoOffset() {
        byte[] found = {(byte) 0xf3, 0x0f, 0x1e, (byte) 0xfa, 0x48, (byte) 0x8b, (byte) 0xb7, 0x70, (byte) 0x99, 0, 0,
                (byte) 0x80, (byte) 0xbe, (byte) 0xf2, 0x07, 0, 0, 0, 0x74, 0x26, 0, 0, 0, 0, 0, 0, 0, 0};
        assertEquals(0x7f2, AccessExitFlag.offsetIn(found));
        byte[] otherRegister = found.clone();
        otherRegister[12] = (byte) 0xbf;        // cmpb on %rdi, not the register just loaded
        assertEquals(-1, AccessExitFlag.offsetIn(otherRegister));
        byte[] notZero = found.clone();
        notZero[17] = 1;                        // cmpb $0x1: not a flag test
        assertEquals(-1, AccessExitFlag.offsetIn(notZero));
    }

    @Test
    void x86StoreStopEndsTheBlockOnlyWithTheCheck() {
        String src = "mov %rax, (%rbx)\n inc %rcx\n inc %rcx\n nop\n";
        assertEquals(0, x86CountAfterStop(src, true), "with the check the engine stops right after the store");
        assertEquals(2, x86CountAfterStop(src, false), "without it the block runs on to its end");
    }

    @Test
    void arm64StoreStopEndsTheBlockOnlyWithTheCheck() {
        String src = "str x0, [x1]\n add x2, x2, #1\n add x2, x2, #1\n nop\n";
        assertEquals(0, arm64CountAfterStop(src, true));
        assertEquals(2, arm64CountAfterStop(src, false));
    }

    @Test
    void aMemoryOrCodeHookKeepsTheCheckWhileItExists() {
        try (Unicorn uc = Unicorn.open(Unicorn.ARCH_X86, Unicorn.MODE_64)) {
            assertTrue(uc.exitsAfterAccess(), "Unicorn's default");
            assertTrue(uc.setExitAfterAccess(false));
            assertFalse(uc.exitsAfterAccess());
            Unicorn.Hook mem = uc.hookMemory(Unicorn.HOOK_MEM_WRITE, 1, 0, (u, type, a, size, value) -> { });
            assertTrue(uc.exitsAfterAccess(), "a write hook may stop inside its store");
            Unicorn.Hook code = uc.hookCode(BASE, BASE + 1, (u, a, size) -> { });
            uc.delete(mem);
            assertTrue(uc.exitsAfterAccess(), "so may a code hook");
            uc.delete(code);
            assertFalse(uc.exitsAfterAccess());
            Unicorn.Hook fetch = uc.hookMemoryEvent(Unicorn.HOOK_MEM_FETCH_UNMAPPED, 1, 0, (u, type, a, size, value) -> false);
            assertFalse(uc.exitsAfterAccess(), "an unmapped fetch ends its block by itself");
            uc.delete(fetch);
            assertTrue(uc.setExitAfterAccess(true));
            assertTrue(uc.exitsAfterAccess());
        }
    }

    @Test
    void machineEnginesRunWithoutTheCheck() {
        try (Unicorn x86 = X86Machine.openEngine()) {
            assertFalse(x86.exitsAfterAccess());
        }
        try (X86Machine m = X86Machine.create(1 << 20)) {
            assertFalse(m.engine().exitsAfterAccess(), "the machine's hooks (block, instructions, interrupts, an unmapped fetch) leave it out");
        }
        try (Arm64Machine m = Arm64Machine.create(1 << 20)) {
            assertFalse(m.engine().exitsAfterAccess());
        }
    }

    /** RCX after a run of {@code src} whose first store goes to MMIO, whose callback stops the engine. */
    private static long x86CountAfterStop(String src, boolean check) {
        return countAfterStop(Unicorn.ARCH_X86, Unicorn.MODE_64, Asm.x86(src, BASE), X86Reg.RBX, X86Reg.RCX, check);
    }

    /** X2 after the same on arm64. */
    private static long arm64CountAfterStop(String src, boolean check) {
        return countAfterStop(Unicorn.ARCH_ARM64, Unicorn.MODE_ARM, Asm.arm64(src, BASE), Arm64Reg.X1, Arm64Reg.X2, check);
    }

    /** Runs {@code code} with {@code pointer} at an MMIO page whose store callback stops the engine; returns register {@code counter}. */
    private static long countAfterStop(int arch, int mode, byte[] code, int pointer, int counter, boolean check) {
        try (Unicorn uc = Unicorn.open(arch, mode)) {
            assertTrue(uc.setExitAfterAccess(check));
            uc.memMap(BASE, 0x1000, Unicorn.PROT_ALL);
            uc.memWrite(BASE, code);
            uc.mmioMap(MMIO, 0x1000, (off, size) -> 0, (off, size, value) -> uc.stop());
            uc.regWrite(pointer, MMIO);
            uc.start(BASE, BASE + code.length, 0, 0);
            return uc.regRead(counter);
        }
    }
}
