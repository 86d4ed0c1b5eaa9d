package dev.kpemu.kprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;

/**
 * A hit's handlers read the registers from one engine batch ({@link LiveRegs}): what they read
 * must be the vCPU's registers all the same — at every hit (a register read on its own joins the
 * batch at the next hit), after a handler's own write, and after a guest call made inside the
 * handler, which runs the guest and restores the CPU context under the batch's copy.
 * {@code kprobe_target(x)} returns {@code x / 3}.
 */
class HitRegistersTest {

    @ParameterizedTest
    @EnumSource(Arch.class)
    void everyHitReadsItsOwnArguments(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            List<Long> seen = new ArrayList<>();
            k.register(Kprobe.at("kprobe_target", 0).pre((p, r) -> {
                seen.add(r.arg(0));
                seen.add(r.get(arch == Arch.X86_64 ? "rdi" : "x0"));
                return 0;
            }));
            for (long x : new long[] {9, 300, 6_000_000_000L}) assertEquals(x / 3, g.call("kprobe_target", x));
            assertEquals(List.of(9L, 9L, 300L, 300L, 6_000_000_000L, 6_000_000_000L), seen);
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void aHandlersWriteIsWhatItAndTheGuestReadNext(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            long[] readBack = {0};
            k.register(Kprobe.at("kprobe_target", 0).pre((p, r) -> {
                r.arg(0);                // the batch read first, then the write
                r.setArg(0, 99);
                readBack[0] = r.arg(0);
                return 0;
            }));
            assertEquals(33, g.call("kprobe_target", 12));
            assertEquals(99, readBack[0]);
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void aGuestCallInsideAHandlerLeavesItTheTrappedRegisters(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            long target = g.sym("kprobe_target");
            GuestFunctionCall guest = GuestFunctionCall.on(k);
            long[] got = new long[3];
            k.register(Kprobe.at("kprobe_target", 0).pre((p, r) -> {
                r.returnValue();                             // rax / x0 and the argument join the batch at the first hit
                if (r.arg(0) != 30) return 0;
                got[0] = r.arg(0);
                got[1] = guest.call(target, 600);           // runs the guest, then restores the context
                got[2] = r.arg(0);
                return 0;
            }));
            assertEquals(1, g.call("kprobe_target", 3));
            assertEquals(10, g.call("kprobe_target", 30));
            assertEquals(30, got[0]);
            assertEquals(200, got[1]);
            assertEquals(30, got[2]);
        }
    }
}
