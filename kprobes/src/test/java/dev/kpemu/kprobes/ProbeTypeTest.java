package dev.kpemu.kprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;

/**
 * {@link Probe}, the one type over kprobes and kretprobes: the engine registers either through it,
 * and {@link Probe#missed()} counts as Linux's {@code kprobe_profile} does
 * ({@code kernel/trace/trace_kprobe.c}: a kretprobe's misses are {@code rp.kp.nmissed + rp.nmissed}).
 */
class ProbeTypeTest {

    @ParameterizedTest
    @EnumSource(Arch.class)
    void bothKindsRegisterThroughTheCommonType(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            int[] entries = {0}, returns = {0};
            Probe kp = Kprobe.at("kprobe_target", 0).pre((p, r) -> {
                entries[0]++;
                return 0;
            });
            Probe rp = Kretprobe.at("kprobe_target").handler((ri, r) -> {
                returns[0]++;
                return 0;
            });
            for (Probe p : List.of(kp, rp)) k.register(p);
            assertTrue(kp.isRegistered() && rp.isRegistered());
            assertSame(rp.entryProbe(), ((Kretprobe) rp).kprobe());
            assertSame(kp, kp.entryProbe());
            assertEquals(2, k.probesAt(g.sym("kprobe_target")).size());
            assertEquals(KprobesKunitTest.RAND1 / 3, g.call("kprobe_target", KprobesKunitTest.RAND1));
            assertEquals(1, entries[0]);
            assertEquals(1, returns[0]);
            k.disable(rp);
            assertTrue(rp.entryProbe().isDisabled());
            for (Probe p : List.of(kp, rp)) k.unregister(p);
            assertFalse(kp.isRegistered() || rp.isRegistered());
            assertEquals(List.of(), k.probesAt(g.sym("kprobe_target")));
        }
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void aKretprobesMissesIncludeItsEntryProbes(Arch arch) {
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            long target = g.sym("kprobe_target");
            GuestFunctionCall guest = GuestFunctionCall.on(k);
            // the entry handler calls the function again: that hit finds a kprobe running (a reentry)
            Kretprobe rp = Kretprobe.at("kprobe_target").entryHandler((ri, r) -> {
                guest.call(target, KprobesKunitTest.RAND1);
                return 0;
            });
            k.register(rp);
            assertEquals(KprobesKunitTest.RAND1 / 3, g.call("kprobe_target", KprobesKunitTest.RAND1));
            assertEquals(1, rp.kprobe().nmissed(), "the nested hit is the entry kprobe's miss");
            assertEquals(0, rp.nmissed(), "an instance was free");
            assertEquals(1, ((Probe) rp).missed());
            k.unregister(rp);
            KprobesKunitTest.noHandlerFailures(k);
        }
    }
}
