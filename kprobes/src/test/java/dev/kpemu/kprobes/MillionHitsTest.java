package dev.kpemu.kprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.LinkedHashMap;
import java.util.Map;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.kpemu.machine.Arch;

/** One probe hit a million times (stepped out of line, with pre and post handlers) leaves every register as an unprobed run does. */
class MillionHitsTest {
    static final long N = 1_000_000;

    static Map<String, Long> registers(Kprobes k) {
        Map<String, Long> m = new LinkedHashMap<>();
        for (String n : k.regs().names()) m.put(n, k.regs().get(n));
        return m;
    }

    @ParameterizedTest
    @EnumSource(Arch.class)
    void millionHitsMatchTheUnprobedRun(Arch arch) {
        Map<String, Long> unprobed, probed;
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            g.call("mul_loop", N);
            unprobed = registers(k);
        }
        long[] hits = {0, 0};
        try (Guest g = Guest.create(arch); Kprobes k = g.kprobes()) {
            String mul = arch == Arch.X86_64 ? "imul" : "mul";
            k.register(Kprobe.at(g.find("mul_loop", mul)).pre((p, r) -> { hits[0]++; return 0; }).post((p, r, f) -> hits[1]++));
            g.call("mul_loop", N);
            probed = registers(k);
            KprobesKunitTest.noHandlerFailures(k);
        }
        assertEquals(N, hits[0]);
        assertEquals(N, hits[1]);
        assertEquals(unprobed, probed);
    }
}
