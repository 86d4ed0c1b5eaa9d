package dev.kpemu.kprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.Arch;

/** arm64 specifics: simulated PC-relative and branch instructions, refused classes, BRK dispatch, boosting. */
class Arm64KprobesTest {
    static void sameResultProbed(Guest g, Kprobes k, long address, String fn, long... args) {
        X86KprobesTest.sameResultProbed(g, k, address, fn, args);
    }

    @Test
    void adrpIsSimulated() {
        try (Guest g = Guest.create(Arch.ARM64); Kprobes k = g.kprobes()) {
            assertEquals(Arm64Guest.DATA + 0x1000, g.call("adrp_func"));
            sameResultProbed(g, k, g.sym("adrp_func"), "adrp_func");
        }
    }

    @Test
    void ldrLiteralAndLdrswLiteralAreSimulated() {
        try (Guest g = Guest.create(Arch.ARM64); Kprobes k = g.kprobes()) {
            assertEquals(0x1122334455667788L, g.call("ldr_literal_func"));
            sameResultProbed(g, k, g.sym("ldr_literal_func"), "ldr_literal_func");
            assertEquals(-16L, g.call("ldrsw_literal_func"));
            sameResultProbed(g, k, g.sym("ldrsw_literal_func"), "ldrsw_literal_func");
        }
    }

    @Test
    void blIsSimulated() {
        try (Guest g = Guest.create(Arch.ARM64); Kprobes k = g.kprobes()) {
            assertEquals(130, g.call("bl_func", 90));
            sameResultProbed(g, k, g.find("bl_func", "bl"), "bl_func", 90);
        }
    }

    @Test
    void cbzAndTbzAreSimulatedBothWays() {
        try (Guest g = Guest.create(Arch.ARM64); Kprobes k = g.kprobes()) {
            sameResultProbed(g, k, g.sym("cbz_func"), "cbz_func", 0);
            sameResultProbed(g, k, g.sym("cbz_func"), "cbz_func", 1L << 40);
            assertEquals(1, g.call("cbz_func", 1L << 40));
            sameResultProbed(g, k, g.sym("tbz_func"), "tbz_func", 8);
            sameResultProbed(g, k, g.sym("tbz_func"), "tbz_func", 7);
        }
    }

    @Test
    void blrAndRetAreSimulated() {
        try (Guest g = Guest.create(Arch.ARM64); Kprobes k = g.kprobes()) {
            assertEquals(31, g.call("blr_func", 90));
            sameResultProbed(g, k, g.find("blr_func", "blr"), "blr_func", 90);
            sameResultProbed(g, k, g.find("blr_func", "ret"), "blr_func", 90);
        }
    }

    @Test
    void refusedClassesAreEinval() {
        try (Guest g = Guest.create(Arch.ARM64); Kprobes k = g.kprobes()) {
            assertEquals(Errno.EINVAL, assertThrows(KprobeException.class, () -> k.register(Kprobe.at("kprobe_target", 2))).errno(), "unaligned");
            assertEquals(Errno.EINVAL, assertThrows(KprobeException.class, () -> k.register(Kprobe.at("ldxr_func", 0))).errno(), "ldxr");
            assertEquals(Errno.EINVAL, assertThrows(KprobeException.class, () -> k.register(Kprobe.at("ldxr_func", 4))).errno(), "inside ldxr/stxr");
            assertEquals(Errno.EINVAL, assertThrows(KprobeException.class, () -> k.register(Kprobe.at("brk_func", 0))).errno(), "brk");
            k.register(Kprobe.at("ldxr_func", 16)); // the ret after the stxr
        }
    }

    @Test
    void brkThatIsNotOursReachesTheGuest() {
        try (Guest g = Guest.create(Arch.ARM64); Kprobes k = g.kprobes()) {
            k.register(Kprobe.at("kprobe_target", 0));
            assertEquals(5, g.call("brk_func"));
            assertEquals(1, g.data(Guest.BP_COUNT), "the guest's synchronous handler ran");
        }
    }

    @Test
    void steppedCopyIsBoostedWithoutPostHandler() {
        try (Guest g = Guest.create(Arch.ARM64); Kprobes k = g.kprobes()) {
            int[] hits = {0};
            Kprobe a = Kprobe.at(g.find("kprobe_target", "udiv")).pre((p, r) -> { hits[0]++; return 0; });
            k.register(a);
            assertTrue(k.isBoosted(a.address()));
            assertEquals(30, g.call("kprobe_target", 90));
            Kprobe b = Kprobe.at(a.address()).post((p, r, f) -> hits[0] += 10);
            k.register(b);
            assertFalse(k.isBoosted(a.address()));
            assertEquals(30, g.call("kprobe_target", 90));
            assertEquals(12, hits[0]);
        }
    }
}
