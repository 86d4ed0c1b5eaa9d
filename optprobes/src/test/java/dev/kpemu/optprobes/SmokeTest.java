package dev.kpemu.optprobes;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.kpemu.kprobes.Kprobe;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.machine.Arch;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class SmokeTest {
    @ParameterizedTest
    @EnumSource(Arch.class)
    void optimizes(Arch arch) {
        try (EngineGuest g = new EngineGuest(arch, Functions.basic(arch)); Kprobes k = g.kprobes()) {
            JumpOptimizer o = JumpOptimizer.attach(k);
            long[] ips = new long[4];
            int[] hits = {0};
            k.register(Kprobe.at("prologue", 0).pre((p, r) -> { ips[hits[0]++ & 3] = r.ip(); return 0; }));
            System.out.println(o.state(g.sym("prologue")) + " " + o.verdict(g.sym("prologue")));
            System.out.print(k.list());
            assertEquals(10, g.call("prologue", 3));
            assertEquals(0, o.flush());
            System.out.println(o.state(g.sym("prologue")));
            assertEquals(13, g.call("prologue", 4));
            assertEquals(2, hits[0]);
            System.out.printf("%x %x %x%n", g.sym("prologue"), ips[0], ips[1]);
        }
    }
}
