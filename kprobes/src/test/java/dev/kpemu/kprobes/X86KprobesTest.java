package dev.kpemu.kprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.kpemu.machine.Arch;

/** x86-64 specifics: RIP-relative fix-up, emulated branches, pushf, boosting, instruction boundaries. */
class X86KprobesTest {
    /** Probes {@code address} with counting pre and post handlers and checks the call gives the unprobed result. */
    static void sameResultProbed(Guest g, Kprobes k, long address, String fn, long... args) {
        long expected = g.call(fn, args);
        int[] hits = {0, 0};
        Kprobe p = Kprobe.at(address).pre((kp, r) -> { hits[0]++; return 0; }).post((kp, r, f) -> hits[1]++);
        k.register(p);
        assertEquals(expected, g.call(fn, args), fn + " probed at 0x" + Long.toHexString(address));
        assertEquals(1, hits[0], "pre handler");
        assertEquals(1, hits[1], "post handler");
        k.unregister(p);
        KprobesKunitTest.noHandlerFailures(k);
    }

    @Test
    void ripRelativeLoadIsFixedUpInTheSlot() {
        try (Guest g = Guest.create(Arch.X86_64); Kprobes k = g.kprobes()) {
            assertEquals(0x1122334455667788L, g.call("rip_load"));
            sameResultProbed(g, k, g.sym("rip_load"), "rip_load");
        }
    }

    @Test
    void rel32CallIsEmulated() {
        try (Guest g = Guest.create(Arch.X86_64); Kprobes k = g.kprobes()) {
            assertEquals(130, g.call("rel32_call", 90));
            sameResultProbed(g, k, g.find("rel32_call", "call"), "rel32_call", 90);
        }
    }

    @Test
    void jccIsEmulatedTakenAndNotTaken() {
        try (Guest g = Guest.create(Arch.X86_64); Kprobes k = g.kprobes()) {
            long jl = g.find("jcc_func", "jl");
            sameResultProbed(g, k, jl, "jcc_func", 3);
            sameResultProbed(g, k, jl, "jcc_func", 30);
            sameResultProbed(g, k, jl, "jcc_func", -5);
            assertEquals(2, g.call("jcc_func", -5));
        }
    }

    @Test
    void conditionTableMatchesTheArchitecture() {
        long zf = 1 << 6, sf = 1 << 7, of = 1 << 11;
        assertTrue(X86Kprobes_condition(0xe, zf), "jle with ZF=1, SF=OF (the 5.11 bug case)");
        assertFalse(X86Kprobes_condition(0xf, zf), "jg with ZF=1");
        assertTrue(X86Kprobes_condition(0xc, sf), "jl with SF!=OF");
        assertFalse(X86Kprobes_condition(0xc, sf | of), "jl with SF=OF");
    }

    private static boolean X86Kprobes_condition(int cc, long flags) {
        return dev.kpemu.kprobes.x86.X86KprobesAccess.condition(cc, flags);
    }

    @Test
    void retIsEmulated() {
        try (Guest g = Guest.create(Arch.X86_64); Kprobes k = g.kprobes()) {
            sameResultProbed(g, k, g.find("ret_func", "ret"), "ret_func", 1234);
        }
    }

    @Test
    void pushfIsEmulated() {
        try (Guest g = Guest.create(Arch.X86_64); Kprobes k = g.kprobes()) {
            sameResultProbed(g, k, g.sym("pushf_func"), "pushf_func");
        }
    }

    @Test
    void loopIsEmulated() {
        try (Guest g = Guest.create(Arch.X86_64); Kprobes k = g.kprobes()) {
            long loop = g.find("loop_func", "loop");
            long expected = g.call("loop_func", 10);
            assertEquals(55, expected);
            int[] hits = {0};
            k.register(Kprobe.at(loop).pre((p, r) -> { hits[0]++; return 0; }));
            assertEquals(55, g.call("loop_func", 10));
            assertEquals(10, hits[0]);
        }
    }

    @Test
    void middleOfAnInstructionIsEilseqAndTrapsAreRefused() {
        try (Guest g = Guest.create(Arch.X86_64); Kprobes k = g.kprobes()) {
            assertEquals(Errno.EILSEQ, assertThrows(KprobeException.class, () -> k.register(Kprobe.at("kprobe_target", 2))).errno());
            assertEquals(Errno.EINVAL, assertThrows(KprobeException.class, () -> k.register(Kprobe.at("int3_func", 0))).errno());
            k.register(Kprobe.at("kprobe_target", 1)); // mov %rsp, %rbp: a boundary
        }
    }

    @Test
    void entryProbesGoPastTheIbtLandingPad() {
        try (Guest g = Guest.create(Arch.X86_64); Kprobes k = g.kprobes()) {
            long fn = g.sym("ibt_func");
            Kprobe atZero = Kprobe.at("ibt_func", 0), atFour = Kprobe.at("ibt_func", 4);
            k.register(atZero);
            k.register(atFour);
            assertEquals(fn + 4, atZero.address(), "offset 0 moves past endbr64");
            assertEquals(fn + 4, atFour.address());
            assertTrue((atZero.flags() & Kprobe.FLAG_ON_FUNC_ENTRY) != 0, "offset 0 is the entry");
            assertTrue((atFour.flags() & Kprobe.FLAG_ON_FUNC_ENTRY) != 0, "offset 4 is the entry too");
            assertEquals(Errno.EILSEQ, assertThrows(KprobeException.class, () -> k.register(Kprobe.at("ibt_func", 2))).errno());
            long[] returned = {0};
            Kretprobe rp = Kretprobe.at("ibt_func").handler((ri, r) -> { returned[0] = r.returnValue(); return 0; });
            k.register(rp);
            assertEquals(fn + 4, rp.kp.address());
            assertEquals(12, g.call("ibt_func", 5));
            assertEquals(12, returned[0], "the kretprobe saw the return value");
            Kretprobe mid = Kretprobe.at("ibt_func", 5);
            assertEquals(Errno.EINVAL, assertThrows(KprobeException.class, () -> k.register(mid)).errno(), "+5 is not the entry");
            Kprobe plain = Kprobe.at("kprobe_target", 0);
            k.register(plain);
            assertEquals(g.sym("kprobe_target"), plain.address(), "no landing pad: the probe stays at offset 0");
            KprobesKunitTest.noHandlerFailures(k);
        }
    }

    @Test
    void boostedWithoutPostHandlerNotWithOne() {
        try (Guest g = Guest.create(Arch.X86_64); Kprobes k = g.kprobes()) {
            int[] hits = {0};
            Kprobe a = Kprobe.at("kprobe_target", 0).pre((p, r) -> { hits[0]++; return 0; });
            k.register(a);
            assertTrue(k.isBoosted(a.address()), "push %rbp, no post handler: boosted");
            assertEquals(30, g.call("kprobe_target", 90));
            Kprobe b = Kprobe.at("kprobe_target", 0).post((p, r, f) -> hits[0] += 10);
            k.register(b);
            assertFalse(k.isBoosted(a.address()), "a post handler turns boosting off");
            assertEquals(30, g.call("kprobe_target", 90));
            k.unregister(b);
            assertTrue(k.isBoosted(a.address()));
            assertEquals(30, g.call("kprobe_target", 90));
            assertEquals(13, hits[0]);
        }
    }

    @Test
    void int3ThatIsNotOursReachesTheGuest() {
        try (Guest g = Guest.create(Arch.X86_64); Kprobes k = g.kprobes()) {
            k.register(Kprobe.at("kprobe_target", 0));
            assertEquals(5, g.call("int3_func"));
            assertEquals(1, g.data(Guest.BP_COUNT), "the guest's #BP handler ran");
        }
    }
}
